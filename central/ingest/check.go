package ingest

import (
	"bytes"
	"fmt"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/audit/leaf"
	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/central/verify"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// checkHead verifies a head on its own and that peer may publish it.
func (in *Ingester) checkHead(peer string, h head.Head) error {
	if err := verify.Head(h, in.opts.CA); err != nil {
		reason := ReasonInvalidHead
		switch verify.KindOf(err) {
		case verify.Certificate:
			reason = ReasonCertificate
		case verify.Signature:
			reason = ReasonSignature
		case verify.Appliance:
			reason = ReasonApplianceMismatch
		}
		return &Refusal{Class: Invalid, Reason: reason, Err: err}
	}
	if h.ApplianceID != peer {
		return refuse(Denied, ReasonApplianceMismatch, "appliance %s may not publish a head of %s", peer, h.ApplianceID)
	}
	at, _ := h.SignedTime()
	if now := in.opts.Now(); at.After(now.Add(in.opts.MaxSkew)) {
		return refuse(Invalid, ReasonFromFuture, "signed_at %s is more than %s after the central clock (%s)",
			h.SignedAt, in.opts.MaxSkew, head.FormatSignedAt(now))
	}
	return nil
}

// checkLeaves checks an upload's leaves on their own: consecutive indices
// from FirstLeafIndex to the head's event_count, request ids well formed
// and distinct, 32-byte hashes, sequences increasing and possible for
// their index, the last one being the head's last_sequence.
func checkLeaves(u Upload) error {
	h := u.Head
	if u.FirstLeafIndex > h.EventCount {
		return refuse(Invalid, ReasonInvalidLeaves, "first leaf index %d is past the head's event_count %d", u.FirstLeafIndex, h.EventCount)
	}
	if want := h.EventCount - u.FirstLeafIndex; uint64(len(u.Leaves)) != want {
		return refuse(Invalid, ReasonInvalidLeaves, "%d leaves from index %d, the head has %d events: want %d leaves",
			len(u.Leaves), u.FirstLeafIndex, h.EventCount, want)
	}
	seen := make(map[string]struct{}, len(u.Leaves))
	var prev uint64
	for i, l := range u.Leaves {
		switch {
		case l.LeafIndex != u.FirstLeafIndex+uint64(i):
			return refuse(Invalid, ReasonInvalidLeaves, "leaf %d has index %d, want %d", i, l.LeafIndex, u.FirstLeafIndex+uint64(i))
		case ids.CheckRequest(l.RequestID) != nil:
			return refuse(Invalid, ReasonInvalidLeaves, "leaf %d: request id %q is not req_<id>", l.LeafIndex, l.RequestID)
		case len(l.LeafHash) != 32:
			return refuse(Invalid, ReasonInvalidLeaves, "leaf %d: hash of %d bytes", l.LeafIndex, len(l.LeafHash))
		case l.Sequence <= l.LeafIndex || (i > 0 && l.Sequence <= prev):
			return refuse(Invalid, ReasonInvalidLeaves, "leaf %d: sequence %d does not follow %d", l.LeafIndex, l.Sequence, prev)
		}
		if err := checkLeafBytes(h, l); err != nil {
			return err
		}
		if _, dup := seen[l.RequestID]; dup {
			return refuse(Invalid, ReasonDuplicateRequestID, "request id %s twice in the upload", l.RequestID)
		}
		seen[l.RequestID] = struct{}{}
		prev = l.Sequence
	}
	if n := len(u.Leaves); n > 0 && u.Leaves[n-1].Sequence != h.LastSequence {
		return refuse(Invalid, ReasonInvalidLeaves, "the last leaf has sequence %d, the head's last_sequence is %d",
			u.Leaves[n-1].Sequence, h.LastSequence)
	}
	return nil
}

// checkLeafBytes checks a leaf's canonical bytes, when the appliance sent
// them (one that predates them sends the hash alone): they hash to the
// leaf hash, are a strict canonical leaf (leaf.Parse), and name the head's
// tenant and appliance and the leaf's own request id and sequence, so
// that a proof served with them binds the request. The day is not in a
// leaf: the head's signature binds it, and the leaf joins the head's tree
// by its hash.
func checkLeafBytes(h head.Head, l store.Leaf) error {
	if len(l.Leaf) == 0 {
		return nil
	}
	if got := leaf.Hash(l.Leaf); !bytes.Equal(got, l.LeafHash) {
		return refuse(Invalid, ReasonInvalidLeaves, "leaf %d: its bytes hash to %x, not its leaf hash %x", l.LeafIndex, got, l.LeafHash)
	}
	lf, err := leaf.Parse(l.Leaf)
	if err != nil {
		return refuse(Invalid, ReasonInvalidLeaves, "leaf %d: %v", l.LeafIndex, err)
	}
	if lf.TenantID != h.TenantID || lf.ApplianceID != h.ApplianceID || lf.RequestID != l.RequestID || lf.Sequence != l.Sequence {
		return refuse(Invalid, ReasonInvalidLeaves, "leaf %d names %s (sequence %d) of %s/%s, the upload %s (sequence %d) of %s/%s",
			l.LeafIndex, lf.RequestID, lf.Sequence, lf.TenantID, lf.ApplianceID, l.RequestID, l.Sequence, h.TenantID, h.ApplianceID)
	}
	return nil
}

// storeErr wraps a store error met while extending a tree.
func storeErr(what string, err error) error { return fmt.Errorf("ingest: %s: %w", what, err) }
