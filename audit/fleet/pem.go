package fleet

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"github.com/tollgate-dev/tollgate/internal/durable"
)

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// encodeKey writes a private key as a PKCS #8 "PRIVATE KEY" PEM block, for
// either kind of appliance key and for the CA's.
func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("fleet: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParseCertificatePEM parses the first CERTIFICATE block of data.
func ParseCertificatePEM(data []byte) (*x509.Certificate, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("fleet: no CERTIFICATE PEM block")
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("fleet: parse certificate: %w", err)
		}
		return cert, nil
	}
}

// parseKey parses a private key, PKCS #8 ("PRIVATE KEY") or SEC 1 ("EC
// PRIVATE KEY", ECDSA only).
func parseKey(data []byte) (any, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("fleet: no PEM block in key file")
	}
	var key any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("fleet: unexpected PEM block %q in key file", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("fleet: parse key: %w", err)
	}
	return key, nil
}

// parseCAKey parses the fleet CA's key, ECDSA P-256.
func parseCAKey(data []byte) (*ecdsa.PrivateKey, error) {
	key, err := parseKey(data)
	if err != nil {
		return nil, err
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, errors.New("fleet: the CA key is not ECDSA P-256")
	}
	return ec, nil
}

// parseApplianceKey parses an appliance key, Ed25519 (PKCS #8) or ECDSA
// P-256 (PKCS #8 or SEC 1), and returns its kind.
func parseApplianceKey(data []byte) (crypto.Signer, KeyKind, error) {
	key, err := parseKey(data)
	if err != nil {
		return nil, "", err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, "", fmt.Errorf("fleet: %T key, an appliance key is Ed25519 or ECDSA P-256", key)
	}
	kind, err := KindOf(signer.Public())
	if err != nil {
		return nil, "", err
	}
	return signer, kind, nil
}

func readCert(file string) ([]byte, *x509.Certificate, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, fmt.Errorf("fleet: %w", err)
	}
	cert, err := ParseCertificatePEM(data)
	if err != nil {
		return nil, nil, fmt.Errorf("fleet: %s: %w", file, err)
	}
	return data, cert, nil
}

func readCAKey(file string) (*ecdsa.PrivateKey, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	key, err := parseCAKey(data)
	if err != nil {
		return nil, fmt.Errorf("fleet: %s: %w", file, err)
	}
	return key, nil
}

// writeNew creates path with data and syncs it; it fails if path exists.
func writeNew(path string, data []byte, perm os.FileMode) error {
	if err := durable.Create(path, data, perm); err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	return nil
}
