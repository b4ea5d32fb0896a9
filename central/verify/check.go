package verify

import (
	"bytes"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/audit/leaf"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// Head verifies a head on its own against the fleet CA certificate, in the
// order of docs/audit-format.md ("Verifying a head"), classifying the first
// failure: canonical encodings (Malformed), the format's rules (HeadRule),
// the certificate chain at signed_at (Certificate), the appliance id
// (Appliance), the signature over the checkpoint body (Signature).
func Head(h head.Head, ca *x509.Certificate) error {
	if err := checkEncodings(h); err != nil {
		return wrap(Malformed, err)
	}
	body, err := head.Body(h)
	if err != nil {
		return wrap(HeadRule, err)
	}
	at, err := h.SignedTime()
	if err != nil {
		return wrap(HeadRule, err)
	}
	der, _ := certificateDER(h.Certificate)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return wrap(Certificate, fmt.Errorf("parse certificate: %w", err))
	}
	id, err := fleet.Verify([]*x509.Certificate{cert}, ca, at)
	if err != nil {
		return wrap(Certificate, err)
	}
	if id != h.ApplianceID {
		return fail(Appliance, "certificate is for %s, head is from %s", id, h.ApplianceID)
	}
	sig, _ := decodeSignature(h.Signature)
	if err := fleet.CheckSignature(cert, body, sig); err != nil {
		return wrap(Signature, fmt.Errorf("signature over the checkpoint body: %w", err))
	}
	return nil
}

// Proof verifies an inclusion proof: its head (Head), that the proof's
// members agree with the head, and the RFC 6962 inclusion of leaf_hash at
// leaf_index in a tree of tree_size leaves under the head's root.
//
// request_id and sequence are not bound by the leaf hash alone: BindLeaf
// binds them through the canonical leaf.
func Proof(p ProofDoc, ca *x509.Certificate) error {
	if err := ids.CheckAppliance(p.ApplianceID); err != nil {
		return wrap(Malformed, err)
	}
	if _, err := ids.ParseDay(p.Day); err != nil {
		return wrap(Malformed, err)
	}
	if err := ids.CheckRequest(p.RequestID); err != nil {
		return wrap(Malformed, err)
	}
	if err := Head(p.Head, ca); err != nil {
		return err
	}
	return proofUnderHead(p)
}

// proofUnderHead is Proof after its head verified: the proof's members
// agree with the head, and the audit path leads to its root.
func proofUnderHead(p ProofDoc) error {
	h := p.Head
	switch {
	case p.ApplianceID != h.ApplianceID || p.Day != h.Day:
		return fail(Mismatch, "proof of %s/%s under a head of %s/%s", p.ApplianceID, p.Day, h.ApplianceID, h.Day)
	case p.TreeSize != h.EventCount:
		return fail(Mismatch, "tree_size %d is not the head's event_count %d", p.TreeSize, h.EventCount)
	case p.LeafIndex >= p.TreeSize:
		return fail(Mismatch, "leaf_index %d outside a tree of %d leaves", p.LeafIndex, p.TreeSize)
	case p.Sequence <= p.LeafIndex || p.Sequence > h.LastSequence:
		// The tenant's leaf i has an appliance-wide sequence of at least i+1.
		return fail(Mismatch, "sequence %d impossible for leaf %d under last_sequence %d", p.Sequence, p.LeafIndex, h.LastSequence)
	case p.LeafIndex == p.TreeSize-1 && p.Sequence != h.LastSequence:
		return fail(Mismatch, "the last leaf has sequence %d, not the head's last_sequence %d", p.Sequence, h.LastSequence)
	}
	root, _ := h.Root()
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, p.LeafIndex, p.TreeSize, p.LeafHash, p.AuditPath, root); err != nil {
		got, rerr := proof.RootFromInclusionProof(rfc6962.DefaultHasher, p.LeafIndex, p.TreeSize, p.LeafHash, p.AuditPath)
		if rerr != nil {
			return wrap(Inclusion, rerr)
		}
		return fail(Inclusion, "the audit path leads from leaf_hash to root %s, the head's root is %s", hex.EncodeToString(got), h.MerkleRoot)
	}
	return nil
}

// Leaf checks that canonical leaf bytes (the proof's leaf member, or the
// appliance's AuditService.GetEvent) are the leaf a verified proof proves:
// they hash to leaf_hash, are a strict canonical leaf, and name the
// proof's request_id and sequence and its head's tenant and appliance
// (the head's signature binds the day, and the leaf is in the head's tree
// by its hash).
func Leaf(p ProofDoc, leafBytes []byte) error {
	if got := leaf.Hash(leafBytes); !bytes.Equal(got, p.LeafHash) {
		return fail(LeafMismatch, "the leaf hashes to %s, the proof proves leaf_hash %s", hex.EncodeToString(got), hex.EncodeToString(p.LeafHash))
	}
	l, err := leaf.Parse(leafBytes)
	if err != nil {
		return wrap(LeafMismatch, err)
	}
	return leafNames(l, p)
}

// Fork verifies the evidence of a fork: that the appliance's key signed two
// incompatible views of one tree. Both heads verify on their own (Head;
// a failure names the head), are of one tree (tenant, appliance, day) and
// the fork's own members name it (Mismatch). Then either stored_root is
// stored_head's root and the two heads, of one size, have other roots; or,
// rebuilt from the central plane's nodes, stored_root is proven by the
// consistency proof to be stored_head's tree at signed_head's size
// (Inclusion), and signed_head, smaller and not empty, has another root
// there. Heads that agree are no fork (Mismatch).
//
// number and received_at are not signed: they are checked for form only.
func Fork(f ForkDoc, ca *x509.Certificate) error {
	signed, stored := f.SignedHead, f.StoredHead
	for _, h := range []struct {
		name string
		h    head.Head
	}{{"signed_head", signed}, {"stored_head", stored}} {
		if err := Head(h.h, ca); err != nil {
			if e, ok := errors.AsType[*Error](err); ok {
				return &Error{Kind: e.Kind, Err: fmt.Errorf("%s: %w", h.name, e.Err)}
			}
			return err
		}
	}
	switch {
	case signed.TenantID != stored.TenantID || signed.ApplianceID != stored.ApplianceID || signed.Day != stored.Day:
		return fail(Mismatch, "heads of different trees: signed_head of %s/%s/%s, stored_head of %s/%s/%s",
			signed.TenantID, signed.ApplianceID, signed.Day, stored.TenantID, stored.ApplianceID, stored.Day)
	case f.TenantID != signed.TenantID || f.ApplianceID != signed.ApplianceID || f.Day != signed.Day:
		return fail(Mismatch, "fork of %s/%s/%s with heads of %s/%s/%s",
			f.TenantID, f.ApplianceID, f.Day, signed.TenantID, signed.ApplianceID, signed.Day)
	}
	storedRoot := hex.EncodeToString(f.StoredRoot)
	if !f.FromNodes {
		switch {
		case len(f.ConsistencyProof) != 0:
			return fail(Mismatch, "a consistency proof with a stored root not rebuilt from nodes")
		case signed.EventCount != stored.EventCount:
			return fail(Mismatch, "heads of %d and %d events with a stored root not rebuilt from nodes", signed.EventCount, stored.EventCount)
		case storedRoot != stored.MerkleRoot:
			return fail(Mismatch, "stored_root %s is not stored_head's root %s", storedRoot, stored.MerkleRoot)
		case signed.MerkleRoot == stored.MerkleRoot:
			return fail(Mismatch, "no fork: both heads have root %s at %d events", stored.MerkleRoot, stored.EventCount)
		}
		return nil
	}
	switch {
	case signed.EventCount >= stored.EventCount:
		return fail(Mismatch, "signed_head of %d events is not smaller than stored_head of %d", signed.EventCount, stored.EventCount)
	case signed.EventCount == 0:
		// Every tree extends the empty one, whose root is fixed: the proof
		// is empty and binds no stored_root.
		return fail(Mismatch, "no fork: signed_head is of the empty tree")
	}
	root, _ := stored.Root()
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, signed.EventCount, stored.EventCount, f.ConsistencyProof, f.StoredRoot, root); err != nil {
		if m, ok := errors.AsType[proof.RootMismatchError](err); ok {
			// Its own message prints the roots as lists of bytes.
			err = fmt.Errorf("it leads to root %x where %x is expected", m.CalculatedRoot, m.ExpectedRoot)
		}
		return wrap(Inclusion, fmt.Errorf("consistency proof from stored_root at %d events to stored_head of %d: %w", signed.EventCount, stored.EventCount, err))
	}
	if storedRoot == signed.MerkleRoot {
		return fail(Mismatch, "no fork: signed_head's root %s is stored_head's tree at %d events", signed.MerkleRoot, signed.EventCount)
	}
	return nil
}
