package verify

import (
	"errors"

	"github.com/tollgate-dev/tollgate/audit/leaf"
)

// maxLeafBytes bounds a proof's leaf member: the central plane takes
// leaves of at most 16 KiB (centralclient.MaxLeafBytes).
const maxLeafBytes = 16 << 10

// BindLeaf binds a verified proof to its request: the proof's own leaf
// (the leaf member) and given, the canonical leaf an auditor has from the
// appliance (nil: none), must each be the proven leaf (Leaf). A proof
// with neither binds nothing but leaf_hash (its request_id and sequence
// could name any event) and fails: a plane that dropped the leaf from a
// proof must not make it pass. Proofs of leaves an appliance sent with
// their hash alone (one that predates canonical leaves on the wire) carry
// none, and verify with the leaf from the appliance.
func BindLeaf(p ProofDoc, given []byte) error {
	if p.Leaf == nil && given == nil {
		return fail(LeafMismatch, "the proof carries no leaf, so nothing binds request_id %s and sequence %d to leaf_hash; give the event's canonical leaf from the appliance (--leaf)",
			p.RequestID, p.Sequence)
	}
	if p.Leaf != nil {
		if err := Leaf(p, p.Leaf); err != nil {
			return prefix("the proof's leaf: ", err)
		}
	}
	if given != nil {
		if err := Leaf(p, given); err != nil {
			return prefix("the leaf given: ", err)
		}
	}
	return nil
}

// leafNames checks that a proven leaf names the proof's members, each
// failure naming the member.
func leafNames(l leaf.Leaf, p ProofDoc) error {
	switch {
	case l.RequestID != p.RequestID:
		return fail(LeafMismatch, "request_id is %s, the leaf's is %s", p.RequestID, l.RequestID)
	case l.Sequence != p.Sequence:
		return fail(LeafMismatch, "sequence is %d, the leaf's is %d", p.Sequence, l.Sequence)
	case l.TenantID != p.Head.TenantID:
		return fail(LeafMismatch, "the head's tenant_id is %s, the leaf's is %s", p.Head.TenantID, l.TenantID)
	case l.ApplianceID != p.ApplianceID || l.ApplianceID != p.Head.ApplianceID:
		return fail(LeafMismatch, "appliance_id is %s, the leaf's is %s", p.ApplianceID, l.ApplianceID)
	}
	return nil
}

// prefix adds context to a verification error's message, keeping its kind.
func prefix(s string, err error) error {
	if e, ok := errors.AsType[*Error](err); ok {
		return &Error{Kind: e.Kind, Err: errors.New(s + e.Err.Error())}
	}
	return err
}

// readLeaf reads a proof's leaf member: a string, its bytes the canonical
// leaf ("" for none), at most maxLeafBytes.
func readLeaf(r *reader, out *[]byte) error {
	var s string
	if err := r.str(&s); err != nil {
		return err
	}
	if len(s) > maxLeafBytes {
		return fail(Malformed, "a leaf of %d bytes, more than %d", len(s), maxLeafBytes)
	}
	if s != "" {
		*out = []byte(s)
	}
	return nil
}
