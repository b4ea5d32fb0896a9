// Package tlsconf builds the TLS configurations of the central plane's
// ingest: the server requires and verifies a fleet appliance certificate;
// an appliance presents its certificate and trusts the central plane's.
package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/internal/durable"
)

// Server returns the ingest server's configuration: it presents cert and
// accepts only clients whose certificate chains to the fleet CA.
func Server(cert tls.Certificate, fleetCA *x509.Certificate) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(fleetCA)
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}
}

// Appliance returns an appliance's client configuration: it presents the
// appliance certificate, whose key (Ed25519 or ECDSA P-256) signs the
// handshake, and trusts roots for the central plane's certificate, which
// must name serverName.
func Appliance(app *fleet.Appliance, roots *x509.CertPool, serverName string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		Certificates: []tls.Certificate{{
			Certificate: [][]byte{app.Cert.Raw},
			PrivateKey:  app.Key,
			Leaf:        app.Cert,
		}},
		RootCAs:    roots,
		ServerName: serverName,
	}
}

// SelfSigned makes a self-signed ECDSA P-256 server certificate for hosts
// (DNS names or IP addresses), valid for a year: for `tollgate dev`, tests,
// and a central plane started without --tls-cert. It returns the
// certificate and its PEM, for the appliances to trust.
func SelfSigned(hosts ...string) (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("tlsconf: key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("tlsconf: serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "Tollgate central plane", Organization: []string{"Tollgate"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("tlsconf: certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("tlsconf: certificate: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, certPEM, nil
}

// WriteSelfSigned makes a SelfSigned certificate for hosts and writes it
// and its key as PEM to certFile and keyFile (replacing them), durably,
// the key first: a crash between the two leaves no certificate, so the
// next start makes a new pair. It returns the certificate's PEM.
func WriteSelfSigned(certFile, keyFile string, hosts ...string) ([]byte, error) {
	cert, certPEM, err := SelfSigned(hosts...)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: key: %w", err)
	}
	if err := durable.Replace(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, fmt.Errorf("tlsconf: %w", err)
	}
	if err := durable.Replace(certFile, certPEM, 0o644); err != nil {
		return nil, fmt.Errorf("tlsconf: %w", err)
	}
	return certPEM, nil
}

// Pool returns a pool of the certificates in PEM.
func Pool(certPEM []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(certPEM) {
		return nil, fmt.Errorf("tlsconf: no certificate in the PEM")
	}
	return pool, nil
}
