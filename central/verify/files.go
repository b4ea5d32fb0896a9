package verify

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/audit/head"
)

// LoadCA reads the fleet CA certificate (PEM): Input when the file cannot
// be read, BadCA when it holds no CA certificate.
func LoadCA(path string) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, wrap(Input, fmt.Errorf("CA: %w", err))
	}
	cert, err := fleet.ParseCertificatePEM(data)
	if err != nil {
		return nil, wrap(BadCA, fmt.Errorf("%s: %w", path, err))
	}
	if !cert.IsCA {
		return nil, fail(BadCA, "%s is not a CA certificate", path)
	}
	return cert, nil
}

// HeadsDocument parses and verifies a heads document (ParseHeads); the
// first head that fails names its position.
func HeadsDocument(data []byte, ca *x509.Certificate) ([]head.Head, error) {
	heads, err := ParseHeads(data)
	if err != nil {
		return nil, err
	}
	for i, h := range heads {
		if err := Head(h, ca); err != nil {
			var e *Error
			if !errors.As(err, &e) {
				return nil, err
			}
			return nil, &Error{Kind: e.Kind, Err: fmt.Errorf("head %d (%s/%s/%s): %w", i, h.TenantID, h.ApplianceID, h.Day, e.Err)}
		}
	}
	return heads, nil
}

// ProofDocument parses and verifies a proof document (ParseProof, Proof)
// and that it binds its request (BindLeaf): through the leaf it carries,
// and leafBytes when not nil.
func ProofDocument(data []byte, ca *x509.Certificate, leafBytes []byte) (ProofDoc, error) {
	p, err := ParseProof(data)
	if err != nil {
		return ProofDoc{}, err
	}
	if err := Proof(p, ca); err != nil {
		return ProofDoc{}, err
	}
	if err := BindLeaf(p, leafBytes); err != nil {
		return ProofDoc{}, err
	}
	return p, nil
}

// ForksDocument parses and verifies a forks document (ParseForks, Fork);
// the first fork that fails names its position and number.
func ForksDocument(data []byte, ca *x509.Certificate) ([]ForkDoc, error) {
	forks, err := ParseForks(data)
	if err != nil {
		return nil, err
	}
	for i, f := range forks {
		if err := Fork(f, ca); err != nil {
			var e *Error
			if !errors.As(err, &e) {
				return nil, err
			}
			return nil, &Error{Kind: e.Kind, Err: fmt.Errorf("fork %d (number %d, %s/%s/%s): %w", i, f.Number, f.TenantID, f.ApplianceID, f.Day, e.Err)}
		}
	}
	return forks, nil
}
