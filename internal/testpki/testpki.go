// Package testpki issues certificates for tests: a CA of the test's own,
// server certificates for 127.0.0.1 and client certificates with the
// names a test chooses, as tls.Certificate values or PEM files.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"testing"
	"time"
)

// CA is a certificate authority of a test.
type CA struct {
	Cert *x509.Certificate
	// PEM is Cert, PEM-encoded.
	PEM []byte
	key *ecdsa.PrivateKey
}

// Names are what a client certificate names: its Subject CommonName and
// its SANs.
type Names struct {
	CommonName string
	DNS        []string
	Emails     []string
	URIs       []string
}

// NewCA makes a CA named name.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	key := newKey(tb)
	tmpl := template(tb, pkix.Name{CommonName: name})
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	cert := create(tb, tmpl, tmpl, &key.PublicKey, key)
	return &CA{Cert: cert, PEM: pemOf("CERTIFICATE", cert.Raw), key: key}
}

// Pool is a pool trusting the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// WriteCA writes the CA certificate as PEM to file.
func (ca *CA) WriteCA(tb testing.TB, file string) {
	tb.Helper()
	if err := os.WriteFile(file, ca.PEM, 0o600); err != nil {
		tb.Fatal(err)
	}
}

// Server issues a server certificate for 127.0.0.1 and localhost.
func (ca *CA) Server(tb testing.TB) tls.Certificate {
	tb.Helper()
	cert, _, _ := ca.server(tb)
	return cert
}

// WriteServer issues a server certificate for 127.0.0.1 and localhost
// and writes it and its key as PEM to certFile and keyFile.
func (ca *CA) WriteServer(tb testing.TB, certFile, keyFile string) {
	tb.Helper()
	_, certPEM, keyPEM := ca.server(tb)
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		tb.Fatal(err)
	}
}

func (ca *CA) server(tb testing.TB) (tls.Certificate, []byte, []byte) {
	tb.Helper()
	tmpl := template(tb, pkix.Name{CommonName: "127.0.0.1"})
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	tmpl.DNSNames = []string{"localhost"}
	return ca.issue(tb, tmpl)
}

// Client issues a client certificate naming n.
func (ca *CA) Client(tb testing.TB, n Names) tls.Certificate {
	tb.Helper()
	tmpl := template(tb, pkix.Name{CommonName: n.CommonName})
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	tmpl.DNSNames = n.DNS
	tmpl.EmailAddresses = n.Emails
	for _, s := range n.URIs {
		u, err := url.Parse(s)
		if err != nil {
			tb.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	cert, _, _ := ca.issue(tb, tmpl)
	return cert
}

func (ca *CA) issue(tb testing.TB, tmpl *x509.Certificate) (tls.Certificate, []byte, []byte) {
	tb.Helper()
	key := newKey(tb)
	cert := create(tb, tmpl, ca.Cert, &key.PublicKey, ca.key)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	certPEM, keyPEM := pemOf("CERTIFICATE", cert.Raw), pemOf("PRIVATE KEY", der)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		tb.Fatal(err)
	}
	return pair, certPEM, keyPEM
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

func template(tb testing.TB, subject pkix.Name) *x509.Certificate {
	tb.Helper()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		tb.Fatal(err)
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
}

func create(tb testing.TB, tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, signer *ecdsa.PrivateKey) *x509.Certificate {
	tb.Helper()
	raw, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(raw)
	if err != nil {
		tb.Fatal(err)
	}
	return cert
}

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
