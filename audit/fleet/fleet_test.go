package fleet

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func mustCA(t *testing.T) *CA {
	t.Helper()
	ca, err := NewCA("test fleet CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func mustAppliance(t *testing.T, ca *CA, id string) *Appliance {
	t.Helper()
	certPEM, keyPEM, err := IssueAppliance(ca, id)
	if err != nil {
		t.Fatal(err)
	}
	app, err := ParseAppliance(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return app
}

func TestInitAndLoadCA(t *testing.T) {
	dir := t.TempDir()
	ca, err := InitCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(dir, CAKeyFile))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("CA key file: %v, mode %v", err, info.Mode())
	}
	if _, err := InitCA(dir); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second InitCA = %v, want fs.ErrExist", err)
	}
	loaded, err := LoadCA(filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.Cert.Equal(ca.Cert) || !loaded.Key.Equal(ca.Key) {
		t.Fatal("LoadCA returned another CA")
	}
	cert, err := LoadCACert(filepath.Join(dir, CACertFile))
	if err != nil || !cert.Equal(ca.Cert) {
		t.Fatalf("LoadCACert = %v", err)
	}
}

func TestIssueAndVerify(t *testing.T) {
	ca := mustCA(t)
	app := mustAppliance(t, ca, "app_test1")
	if app.ID != "app_test1" || app.Cert.Subject.CommonName != "app_test1" {
		t.Fatalf("appliance id %q, subject %q", app.ID, app.Cert.Subject.CommonName)
	}
	if len(app.Cert.URIs) != 1 || app.Cert.URIs[0].String() != "urn:tollgate:appliance:app_test1" {
		t.Fatalf("URI SANs %v", app.Cert.URIs)
	}
	id, err := Verify([]*x509.Certificate{app.Cert}, ca.Cert, time.Now())
	if err != nil || id != "app_test1" {
		t.Fatalf("Verify = %q, %v", id, err)
	}
	if _, _, err := IssueAppliance(ca, "not-an-id"); err == nil {
		t.Fatal("IssueAppliance accepted a bad id")
	}
}

func TestVerifyRefuses(t *testing.T) {
	ca := mustCA(t)
	other := mustCA(t)
	app := mustAppliance(t, ca, "app_test1")
	tests := []struct {
		name  string
		chain []*x509.Certificate
		ca    *x509.Certificate
		at    time.Time
	}{
		{"other CA", []*x509.Certificate{app.Cert}, other.Cert, time.Now()},
		{"before validity", []*x509.Certificate{app.Cert}, ca.Cert, app.Cert.NotBefore.Add(-time.Second)},
		{"after validity", []*x509.Certificate{app.Cert}, ca.Cert, app.Cert.NotAfter.Add(time.Second)},
		{"CA as appliance", []*x509.Certificate{ca.Cert}, ca.Cert, time.Now()},
		{"no certificate", nil, ca.Cert, time.Now()},
		{"no CA", []*x509.Certificate{app.Cert}, nil, time.Now()},
		{"appliance as CA", []*x509.Certificate{app.Cert}, app.Cert, time.Now()},
		{"no URI SAN", []*x509.Certificate{craft(t, ca, "app_test2", elliptic.P256(), false)}, ca.Cert, time.Now()},
		{"P-384 key", []*x509.Certificate{craft(t, ca, "app_test3", elliptic.P384(), true)}, ca.Cert, time.Now()},
		{"bad subject", []*x509.Certificate{craft(t, ca, "acme", elliptic.P256(), true)}, ca.Cert, time.Now()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if id, err := Verify(tt.chain, tt.ca, tt.at); err == nil {
				t.Fatalf("Verify accepted, id %q", id)
			}
		})
	}
}

// craft issues a certificate with a new ECDSA key on curve under ca by
// hand, to make malformed ones.
func craft(t *testing.T, ca *CA, cn string, curve elliptic.Curve, withURI bool) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(curve, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return craftKey(t, ca, cn, key, withURI)
}

// craftKey issues a certificate for key under ca by hand, with or without
// the appliance's URI SAN.
func craftKey(t *testing.T, ca *CA, cn string, key crypto.Signer, withURI bool) *x509.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(42),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if withURI {
		tmpl.URIs = append(tmpl.URIs, ApplianceURI(cn))
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestParseApplianceMismatchedKey(t *testing.T) {
	ca := mustCA(t)
	certPEM, _, err := IssueAppliance(ca, "app_a")
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey, err := IssueAppliance(ca, "app_b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseAppliance(certPEM, otherKey); err == nil {
		t.Fatal("ParseAppliance accepted a key of another certificate")
	}
}

func TestEnsureDev(t *testing.T) {
	dir := t.TempDir()
	app, caCert, err := EnsureDev(dir, "app_dev")
	if err != nil {
		t.Fatal(err)
	}
	again, caAgain, err := EnsureDev(dir, "app_dev")
	if err != nil {
		t.Fatal(err)
	}
	if !again.Cert.Equal(app.Cert) || !caAgain.Equal(caCert) {
		t.Fatal("EnsureDev made new material on the second start")
	}
	for _, f := range []string{CACertFile, CAKeyFile, ApplianceCertFile, ApplianceKeyFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	if _, _, err := EnsureDev(dir, "app_other"); err == nil {
		t.Fatal("EnsureDev accepted a certificate of another appliance")
	}
	loaded, err := LoadAppliance(filepath.Join(dir, ApplianceCertFile), filepath.Join(dir, ApplianceKeyFile))
	if err != nil || loaded.ID != "app_dev" {
		t.Fatalf("LoadAppliance = %v", err)
	}
}
