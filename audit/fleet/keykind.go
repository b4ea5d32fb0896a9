package fleet

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
)

// KeyKind is the kind of key an appliance certificate holds. The fleet CA's
// own key is always ECDSA P-256; an appliance's may be either kind, and
// every verifier chooses the signature algorithm by the certificate's key.
type KeyKind string

const (
	// Ed25519 keys sign the body itself (RFC 8032 pure Ed25519, 64-byte
	// signatures): the default, cheaper to sign and to verify.
	Ed25519 KeyKind = "ed25519"
	// ECDSAP256 keys sign SHA-256 of the body, ASN.1 DER: the kind of
	// every appliance issued before Ed25519, still issued on request.
	ECDSAP256 KeyKind = "ecdsa-p256"
)

// DefaultKeyKind is the kind of a new appliance key.
const DefaultKeyKind = Ed25519

// ParseKeyKind parses "ed25519" or "ecdsa-p256".
func ParseKeyKind(s string) (KeyKind, error) {
	switch k := KeyKind(s); k {
	case Ed25519, ECDSAP256:
		return k, nil
	}
	return "", fmt.Errorf("fleet: key kind %q is neither %q nor %q", s, Ed25519, ECDSAP256)
}

// newKey makes a fresh appliance key of kind k.
func newKey(k KeyKind) (crypto.Signer, error) {
	switch k {
	case Ed25519:
		_, key, err := ed25519.GenerateKey(rand.Reader)
		return key, err
	case ECDSAP256:
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	return nil, fmt.Errorf("fleet: no appliance key of kind %q", k)
}

// KindOf returns the kind of an appliance's public key, or an error naming
// the key's type for any other key: RSA, P-384 and the like are refused.
func KindOf(pub crypto.PublicKey) (KeyKind, error) {
	switch p := pub.(type) {
	case ed25519.PublicKey:
		if len(p) == ed25519.PublicKeySize {
			return Ed25519, nil
		}
		return "", fmt.Errorf("fleet: Ed25519 public key of %d bytes", len(p))
	case *ecdsa.PublicKey:
		if p.Curve == elliptic.P256() {
			return ECDSAP256, nil
		}
		return "", fmt.Errorf("fleet: ECDSA key on %s, only P-256 is accepted", p.Curve.Params().Name)
	}
	return "", fmt.Errorf("fleet: %T key, an appliance key is Ed25519 or ECDSA P-256", pub)
}
