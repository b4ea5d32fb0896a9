package etcdtest

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
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// TLSServer is an embedded etcd serving its clients over TLS and asking
// each for a certificate (--client-cert-auth), as a production cluster
// does. Its files are PEM, in a directory of the test's.
type TLSServer struct {
	Endpoints []string
	// CA signed the server's certificate and the client's.
	CA string
	// Cert and Key are a client certificate the server accepts.
	Cert, Key string
	// Client is a TLS configuration with that certificate.
	Client *tls.Config
}

// StartTLS starts a TLS etcd of its own for the test (the shared server
// of Endpoints serves plain HTTP), stopped when the test ends.
func StartTLS(tb testing.TB) TLSServer {
	tb.Helper()
	dir := tb.TempDir()
	ca, caKey := newCert(tb, nil, nil, "etcdtest CA", nil)
	writePEM(tb, filepath.Join(dir, "ca.pem"), "CERTIFICATE", ca.Raw)
	serverCert, serverKey := newCert(tb, ca, caKey, "etcd", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth})
	writePEM(tb, filepath.Join(dir, "server.pem"), "CERTIFICATE", serverCert.Raw)
	writeKey(tb, filepath.Join(dir, "server-key.pem"), serverKey)
	clientCert, clientKey := newCert(tb, ca, caKey, "tollgate", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
	writePEM(tb, filepath.Join(dir, "client.pem"), "CERTIFICATE", clientCert.Raw)
	writeKey(tb, filepath.Join(dir, "client-key.pem"), clientKey)

	cfg := newConfig(filepath.Join(dir, "data"), "https")
	cfg.ClientTLSInfo = transport.TLSInfo{
		CertFile:       filepath.Join(dir, "server.pem"),
		KeyFile:        filepath.Join(dir, "server-key.pem"),
		TrustedCAFile:  filepath.Join(dir, "ca.pem"),
		ClientCertAuth: true,
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		tb.Fatalf("embedded TLS etcd: %v", err)
	}
	tb.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		tb.Fatal("embedded TLS etcd: not ready after 30s")
	}
	s := TLSServer{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "client.pem"), Key: filepath.Join(dir, "client-key.pem")}
	for _, l := range e.Clients {
		s.Endpoints = append(s.Endpoints, "https://"+l.Addr().String())
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	pair, err := tls.LoadX509KeyPair(s.Cert, s.Key)
	if err != nil {
		tb.Fatal(err)
	}
	s.Client = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	return s
}

// NewClient returns a client of the server with its client certificate,
// closed when the test ends.
func (s TLSServer) NewClient(tb testing.TB) *clientv3.Client {
	tb.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: s.Endpoints, TLS: s.Client, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		tb.Fatalf("etcd client: %v", err)
	}
	tb.Cleanup(func() { _ = cli.Close() })
	return cli
}

// newCert makes a P-256 certificate named cn for 127.0.0.1, signed by
// parent, or a self-signed CA when parent is nil.
func newCert(tb testing.TB, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, cn string, usage []x509.ExtKeyUsage) (*x509.Certificate, *ecdsa.PrivateKey) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	signer, signerKey := parent, parentKey
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		tmpl.IPAddresses = nil
		signer, signerKey = tmpl, key
	}
	raw, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(raw)
	if err != nil {
		tb.Fatal(err)
	}
	return cert, key
}

func writePEM(tb testing.TB, path, typ string, der []byte) {
	tb.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
}

func writeKey(tb testing.TB, path string, key *ecdsa.PrivateKey) {
	tb.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	writePEM(tb, path, "PRIVATE KEY", der)
}
