package fleet

import (
	"crypto/x509"
	"errors"
	"fmt"
	"time"
)

// Verify checks that chain[0] is an appliance certificate issued under ca
// (chain[1:] are intermediates, normally none) and valid at the instant at,
// and returns the appliance id it names. Verifiers pass a head's signed_at
// as at, so a head stays verifiable after its certificate expires.
func Verify(chain []*x509.Certificate, ca *x509.Certificate, at time.Time) (string, error) {
	if len(chain) == 0 {
		return "", errors.New("fleet: no certificate to verify")
	}
	if ca == nil || !ca.IsCA {
		return "", errors.New("fleet: the fleet CA certificate is missing or not a CA")
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	leaf := chain[0]
	_, err := leaf.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		CurrentTime:   at,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
	if err != nil {
		return "", fmt.Errorf("fleet: appliance certificate %q: %w", leaf.Subject.CommonName, err)
	}
	if leaf.IsCA {
		return "", fmt.Errorf("fleet: %q is a CA certificate, not an appliance certificate", leaf.Subject.CommonName)
	}
	if leaf.KeyUsage&x509.KeyUsageDigitalSignature == 0 {
		return "", fmt.Errorf("fleet: appliance certificate %q may not sign", leaf.Subject.CommonName)
	}
	return applianceID(leaf)
}
