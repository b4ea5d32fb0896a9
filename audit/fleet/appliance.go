package fleet

import (
	"crypto"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tollgate-dev/tollgate/internal/ids"
)

// Appliance is an appliance's certificate and signing key.
type Appliance struct {
	// ID is the appliance id the certificate names, app_<id>.
	ID      string
	Cert    *x509.Certificate
	CertPEM []byte
	// Key is the certificate's private key, Ed25519 or ECDSA P-256 (Kind).
	Key crypto.Signer
	// Kind is the kind of Key.
	Kind KeyKind
}

// Sign signs body with the appliance key (fleet.Sign), by the kind found
// when the key was parsed: a receipt is signed per batch, on a plain
// request's path at light load.
func (a *Appliance) Sign(body []byte) ([]byte, error) {
	if a.Kind == "" || a.Key == nil {
		return Sign(a.Key, body)
	}
	return signAs(a.Key, a.Kind, body)
}

// LoadAppliance reads an appliance certificate and its key.
func LoadAppliance(certFile, keyFile string) (*Appliance, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	a, err := ParseAppliance(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("fleet: %s, %s: %w", certFile, keyFile, err)
	}
	return a, nil
}

// ParseAppliance parses an appliance certificate and key in PEM and checks
// that they belong together.
func ParseAppliance(certPEM, keyPEM []byte) (*Appliance, error) {
	cert, err := ParseCertificatePEM(certPEM)
	if err != nil {
		return nil, err
	}
	id, err := applianceID(cert)
	if err != nil {
		return nil, err
	}
	key, kind, err := parseApplianceKey(keyPEM)
	if err != nil {
		return nil, err
	}
	if !publicKeyEqual(key.Public(), cert.PublicKey) {
		return nil, fmt.Errorf("fleet: the %s key does not match the appliance certificate of %s", kind, id)
	}
	return &Appliance{ID: id, Cert: cert, CertPEM: certPEM, Key: key, Kind: kind}, nil
}

// SaveAppliance writes an appliance certificate and key to dir as
// ApplianceCertFile and ApplianceKeyFile, refusing to overwrite either.
func SaveAppliance(dir string, certPEM, keyPEM []byte) error {
	if err := writeNew(filepath.Join(dir, ApplianceCertFile), certPEM, 0o644); err != nil {
		return err
	}
	return writeNew(filepath.Join(dir, ApplianceKeyFile), keyPEM, 0o600)
}

// applianceID returns the appliance id a certificate names: its subject
// common name, which must be a valid id and also appear as its URI SAN; the
// key must be Ed25519 or ECDSA P-256 (KindOf).
func applianceID(cert *x509.Certificate) (string, error) {
	id := cert.Subject.CommonName
	if err := checkApplianceID(id); err != nil {
		return "", err
	}
	want := ApplianceURI(id).String()
	found := false
	for _, u := range cert.URIs {
		found = found || u.String() == want
	}
	if !found {
		return "", fmt.Errorf("fleet: certificate for %s lacks the URI SAN %s", id, want)
	}
	if _, err := KindOf(cert.PublicKey); err != nil {
		return "", fmt.Errorf("fleet: certificate for %s: %w", id, err)
	}
	return id, nil
}

func checkApplianceID(id string) error {
	if err := ids.CheckAppliance(id); err != nil {
		return fmt.Errorf("fleet: certificate subject: %w", err)
	}
	return nil
}

// publicKeyEqual reports whether a and b are the same key; both key types
// an appliance may hold have an Equal method.
func publicKeyEqual(a, b crypto.PublicKey) bool {
	k, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(b)
}
