package fleet

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
)

// Sign signs body, a head's checkpoint body or a batch statement, with an
// appliance key: an Ed25519 key signs the body itself (RFC 8032 pure
// Ed25519, 64 bytes); an ECDSA P-256 key signs its SHA-256, ASN.1 DER.
// Heads and receipts both sign here, so their algorithms cannot diverge.
func Sign(key crypto.Signer, body []byte) ([]byte, error) {
	if key == nil {
		return nil, errors.New("fleet: no key to sign with")
	}
	kind, err := KindOf(key.Public())
	if err != nil {
		return nil, err
	}
	return signAs(key, kind, body)
}

// signAs is Sign with the key's kind known.
func signAs(key crypto.Signer, kind KeyKind, body []byte) ([]byte, error) {
	var sig []byte
	var err error
	switch kind {
	case Ed25519:
		sig, err = key.Sign(nil, body, crypto.Hash(0))
	case ECDSAP256:
		digest := sha256.Sum256(body)
		sig, err = key.Sign(rand.Reader, digest[:], crypto.SHA256)
	default:
		return nil, fmt.Errorf("fleet: no appliance key of kind %q", kind)
	}
	if err != nil {
		return nil, fmt.Errorf("fleet: sign: %w", err)
	}
	return sig, nil
}

// CheckSignature verifies sig over body with the key of an appliance
// certificate, choosing the algorithm by that key as Sign does. A
// signature of the wrong length or form for the key is refused.
func CheckSignature(cert *x509.Certificate, body, sig []byte) error {
	if cert == nil {
		return errors.New("fleet: no certificate to verify the signature with")
	}
	kind, err := KindOf(cert.PublicKey)
	if err != nil {
		return err
	}
	switch kind {
	case Ed25519:
		if len(sig) != ed25519.SignatureSize {
			return fmt.Errorf("fleet: an Ed25519 signature is %d bytes, not %d", ed25519.SignatureSize, len(sig))
		}
		return cert.CheckSignature(x509.PureEd25519, body, sig)
	default: // ECDSAP256: SHA-256 of body, ASN.1 DER
		return cert.CheckSignature(x509.ECDSAWithSHA256, body, sig)
	}
}
