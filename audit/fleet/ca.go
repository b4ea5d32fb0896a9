// Package fleet is the fleet PKI of the audit log: a fleet CA (ECDSA P-256,
// self-signed) issues each appliance a certificate naming its appliance id
// for an Ed25519 key (the default) or an ECDSA P-256 key, and a head
// verifies against the fleet CA certificate alone. Keys and certificates
// are PEM files (keys PKCS #8, mode 0600). Sign and CheckSignature are the
// one place that chooses the signature algorithm by the key.
package fleet

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"path/filepath"
	"time"
)

// File names of the fleet PKI in a directory.
const (
	CACertFile        = "fleet-ca.pem"
	CAKeyFile         = "fleet-ca-key.pem"
	ApplianceCertFile = "appliance.pem"
	ApplianceKeyFile  = "appliance-key.pem"
)

// Validity periods. A head is verified at its signed_at time, so an expired
// appliance certificate still verifies the heads it signed while valid.
const (
	CAValidity        = 10 * 365 * 24 * time.Hour
	ApplianceValidity = 3 * 365 * 24 * time.Hour
	// backdate absorbs clock skew between the CA and the appliances.
	backdate = time.Hour
)

// DefaultCAName is the common name of a CA made by InitCA.
const DefaultCAName = "Tollgate fleet CA"

// CA is a fleet certificate authority.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	Key     *ecdsa.PrivateKey
	// Now dates issued certificates; nil means time.Now.
	Now func() time.Time
}

func (ca *CA) now() time.Time {
	if ca.Now != nil {
		return ca.Now()
	}
	return time.Now()
}

// NewCA makes a fleet CA named commonName, valid from now for CAValidity.
func NewCA(commonName string, now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("fleet: CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"Tollgate"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("fleet: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("fleet: CA certificate: %w", err)
	}
	return &CA{Cert: cert, CertPEM: encodeCert(der), Key: key}, nil
}

// InitCA makes a fleet CA and writes it to dir as CACertFile and CAKeyFile.
// It refuses to overwrite an existing CA (the error wraps fs.ErrExist).
func InitCA(dir string) (*CA, error) {
	ca, err := NewCA(DefaultCAName, time.Now())
	if err != nil {
		return nil, err
	}
	keyPEM, err := encodeKey(ca.Key)
	if err != nil {
		return nil, err
	}
	if err := writeNew(filepath.Join(dir, CACertFile), ca.CertPEM, 0o644); err != nil {
		return nil, err
	}
	if err := writeNew(filepath.Join(dir, CAKeyFile), keyPEM, 0o600); err != nil {
		return nil, err
	}
	return ca, nil
}

// LoadCA reads a fleet CA's certificate and key files.
func LoadCA(certFile, keyFile string) (*CA, error) {
	certPEM, cert, err := readCert(certFile)
	if err != nil {
		return nil, err
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("fleet: %s is not a CA certificate", certFile)
	}
	key, err := readCAKey(keyFile)
	if err != nil {
		return nil, err
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("fleet: %s does not hold the key of %s", keyFile, certFile)
	}
	return &CA{Cert: cert, CertPEM: certPEM, Key: key}, nil
}

// LoadCACert reads a fleet CA certificate, which is all a verifier needs.
func LoadCACert(certFile string) (*x509.Certificate, error) {
	_, cert, err := readCert(certFile)
	if err != nil {
		return nil, err
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("fleet: %s is not a CA certificate", certFile)
	}
	return cert, nil
}
