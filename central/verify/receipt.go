package verify

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/audit/receipt"
)

// ParseReceipt parses a receipt document strictly (docs/audit-format.md,
// "Receipts"): its JSON, or the value of an x-tollgate-receipt header
// (unpadded base64url of the JSON), told apart by the first byte.
func ParseReceipt(data []byte) (receipt.Receipt, error) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] != '{' {
		doc, err := base64.RawURLEncoding.Strict().DecodeString(string(data))
		if err != nil || base64.RawURLEncoding.EncodeToString(doc) != string(data) {
			return receipt.Receipt{}, fail(Malformed, "neither a receipt's JSON nor its x-tollgate-receipt header value (unpadded base64url)")
		}
		data = doc
	}
	r, err := newReader(data)
	if err != nil {
		return receipt.Receipt{}, err
	}
	rc, err := readReceipt(r)
	if err != nil {
		return receipt.Receipt{}, err
	}
	return rc, r.end()
}

// readReceipt reads a receipt object strictly, its encodings canonical.
func readReceipt(r *reader) (receipt.Receipt, error) {
	var rc receipt.Receipt
	err := r.object("receipt", map[string]func(*reader) error{
		"schema":       func(r *reader) error { return r.str(&rc.Schema) },
		"request_id":   func(r *reader) error { return r.str(&rc.RequestID) },
		"tenant_id":    func(r *reader) error { return r.str(&rc.TenantID) },
		"appliance_id": func(r *reader) error { return r.str(&rc.ApplianceID) },
		"day":          func(r *reader) error { return r.str(&rc.Day) },
		"sequence":     func(r *reader) error { return r.uint(&rc.Sequence) },
		"leaf_index":   func(r *reader) error { return r.uint(&rc.LeafIndex) },
		"time":         func(r *reader) error { return r.str(&rc.Time) },
		"leaf_hash":    func(r *reader) error { return r.str(&rc.LeafHash) },
		"batch_index":  func(r *reader) error { return r.uint(&rc.BatchIndex) },
		"batch_size":   func(r *reader) error { return r.uint(&rc.BatchSize) },
		"batch_root":   func(r *reader) error { return r.str(&rc.BatchRoot) },
		"batch_path":   func(r *reader) error { return r.strs(&rc.BatchPath) },
		"signed_at":    func(r *reader) error { return r.str(&rc.SignedAt) },
		"signature":    func(r *reader) error { return r.str(&rc.Signature) },
		"certificate":  func(r *reader) error { return r.str(&rc.Certificate) },
	})
	if err != nil {
		return receipt.Receipt{}, err
	}
	// Encodings first, as for a head: no byte may change unnoticed.
	for name, h := range map[string]string{"leaf_hash": rc.LeafHash, "batch_root": rc.BatchRoot} {
		if _, err := decodeHash(h); err != nil {
			return receipt.Receipt{}, fail(Malformed, "receipt.%s: %v", name, err)
		}
	}
	for i, h := range rc.BatchPath {
		if _, err := decodeHash(h); err != nil {
			return receipt.Receipt{}, fail(Malformed, "receipt.batch_path[%d]: %v", i, err)
		}
	}
	if _, err := decodeSignature(rc.Signature); err != nil {
		return receipt.Receipt{}, fail(Malformed, "receipt: %v", err)
	}
	if _, err := certificateDER(rc.Certificate); err != nil {
		return receipt.Receipt{}, fail(Malformed, "receipt: %v", err)
	}
	return rc, nil
}

// Receipt verifies a receipt on its own against the fleet CA certificate,
// classifying the first failure as for a head: the format's rules
// (HeadRule), the certificate chain at signed_at (Certificate), the
// appliance id (Appliance), the claim's path to batch_root (Inclusion),
// the signature over the batch statement (Signature).
func Receipt(r receipt.Receipt, ca *x509.Certificate) error {
	c, err := receipt.Check(r)
	if err != nil {
		return wrap(HeadRule, err)
	}
	cert, err := x509.ParseCertificate(c.CertificateDER)
	if err != nil {
		return wrap(Certificate, fmt.Errorf("parse certificate: %w", err))
	}
	id, err := fleet.Verify([]*x509.Certificate{cert}, ca, c.SignedAt)
	if err != nil {
		return wrap(Certificate, err)
	}
	if id != r.ApplianceID {
		return fail(Appliance, "certificate is for %s, receipt is from %s", id, r.ApplianceID)
	}
	if err := c.InBatch(); err != nil {
		return wrap(Inclusion, err)
	}
	if err := fleet.CheckSignature(cert, c.Statement.Body(), c.Signature); err != nil {
		return wrap(Signature, fmt.Errorf("signature over the batch statement: %w", err))
	}
	return nil
}

// ReceiptDocument parses and verifies a receipt document (ParseReceipt,
// Receipt).
func ReceiptDocument(data []byte, ca *x509.Certificate) (receipt.Receipt, error) {
	r, err := ParseReceipt(data)
	if err != nil {
		return receipt.Receipt{}, err
	}
	return r, Receipt(r, ca)
}

// ProofOfReceipt checks that a verified proof is for the leaf a verified
// receipt promised: the same request, sequence, appliance, day, tenant
// and leaf hash, at the same leaf index (LeafMismatch otherwise).
func ProofOfReceipt(p ProofDoc, r receipt.Receipt) error {
	for _, m := range []struct {
		name        string
		proof, rcpt any
	}{
		{"request_id", p.RequestID, r.RequestID},
		{"sequence", p.Sequence, r.Sequence},
		{"appliance_id", p.ApplianceID, r.ApplianceID},
		{"day", p.Day, r.Day},
		{"tenant_id", p.Head.TenantID, r.TenantID},
		{"leaf_index", p.LeafIndex, r.LeafIndex},
		{"leaf_hash", hex.EncodeToString(p.LeafHash), r.LeafHash},
	} {
		if m.proof != m.rcpt {
			return fail(LeafMismatch, "the proof's %s is %v, the receipt's %v", m.name, m.proof, m.rcpt)
		}
	}
	return nil
}
