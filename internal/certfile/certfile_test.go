package certfile

import (
	"bytes"
	"crypto/tls"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/central/tlsconf"
)

// pair writes a new self-signed certificate and its key as PEM, the
// files' modification time set to at, and returns the certificate's DER.
func pair(t *testing.T, certFile, keyFile string, at time.Time) []byte {
	t.Helper()
	certPEM, err := tlsconf.WriteSelfSigned(certFile, keyFile, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{certFile, keyFile} {
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	block, _ := pem.Decode(certPEM)
	return block.Bytes
}

func write(t *testing.T, path string, data []byte, at time.Time) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

func served(t *testing.T, p *Pair) []byte {
	t.Helper()
	c, err := p.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	return c.Certificate[0]
}

// TestPairFollowsItsFiles: a renewed pair is served from the next
// handshake on; a certificate written before its key leaves the previous
// pair served, reported once, until the key follows.
func TestPairFollowsItsFiles(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	t0 := time.Now().Add(-time.Hour)
	a := pair(t, certFile, keyFile, t0)
	p, err := Load(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	var reports []string
	p.OnError = func(err error) { reports = append(reports, err.Error()) }
	if !bytes.Equal(served(t, p), a) {
		t.Fatal("not the loaded certificate")
	}

	b := pair(t, certFile, keyFile, t0.Add(time.Minute))
	if !bytes.Equal(served(t, p), b) {
		t.Fatal("the renewed certificate is not served")
	}

	// A new certificate, its key not yet written: still b.
	keyB, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	c := pair(t, certFile, keyFile, t0.Add(2*time.Minute))
	keyC, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	write(t, keyFile, keyB, t0.Add(time.Minute))
	for range 2 {
		if !bytes.Equal(served(t, p), b) {
			t.Fatal("a certificate without its key replaced the served pair")
		}
	}
	if len(reports) != 1 || !strings.Contains(reports[0], "serving the previous one") {
		t.Fatalf("reports %q, want one", reports)
	}
	write(t, keyFile, keyC, t0.Add(3*time.Minute))
	if !bytes.Equal(served(t, p), c) {
		t.Fatal("the pair is not served once its key is written")
	}

	// Files gone for a moment: the last pair is served.
	if err := os.Remove(certFile); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(served(t, p), c) {
		t.Fatal("a missing file dropped the served pair")
	}
}

func TestLoadRefusesWhatCannotBeServed(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if _, err := Load(certFile, keyFile); err == nil {
		t.Fatal("Load of missing files succeeded")
	}
	pair(t, certFile, keyFile, time.Now())
	write(t, keyFile, []byte("not a key"), time.Now())
	if _, err := Load(certFile, keyFile); err == nil {
		t.Fatal("Load of a certificate without its key succeeded")
	}
}
