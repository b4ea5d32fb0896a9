package ingest

import (
	"bytes"
	"context"
	"encoding/hex"

	"fmt"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/store"
)

var ranges = &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}

// extend checks that an upload extends the stored tree t (Heads 0: none)
// and returns what to commit: the overlap with stored leaves matches, the
// stored leaves and the new ones rebuild the head's root, and the RFC 6962
// consistency proof from the stored head to the new one verifies.
func (in *Ingester) extend(ctx context.Context, t store.Tree, u Upload) (store.Commit, error) {
	h, old := u.Head, t.Head
	id := store.TreeOf(h)
	var size uint64 // leaves stored
	if t.Heads > 0 {
		switch {
		case t.LeavesPruned:
			return store.Commit{}, refuse(Precondition, ReasonLeavesPruned, "the leaves of %s are past retention", id)
		case old.Final():
			return store.Commit{}, refuse(Precondition, ReasonTreeFinal, "%s has a final head (signed_at %s)", id, old.SignedAt)
		case h.EventCount > old.EventCount && h.LastSequence < old.LastSequence:
			// No appliance signs this: its tree grew while its last
			// sequence went back. Not stale (which the forwarder drops as
			// superseded): broken, refused and logged as such.
			return store.Commit{}, refuse(Invalid, ReasonInvalidLeaves, "head of %d events has last_sequence %d, behind the stored head of %d events (last_sequence %d)",
				h.EventCount, h.LastSequence, old.EventCount, old.LastSequence)
		case h.EventCount < old.EventCount || h.LastSequence < old.LastSequence:
			r := refuse(Precondition, ReasonStaleHead, "head of %d events (last_sequence %d) is behind the stored %d (last_sequence %d)",
				h.EventCount, h.LastSequence, old.EventCount, old.LastSequence)
			r.StoredEventCount = old.EventCount
			return store.Commit{}, r
		case h.EventCount == old.EventCount && signedBefore(h, old):
			// The latest head's signed_at never goes back.
			r := refuse(Precondition, ReasonStaleHead, "head of the stored %d events is signed at %s, before the stored one (%s)",
				h.EventCount, h.SignedAt, old.SignedAt)
			r.StoredEventCount = old.EventCount
			return store.Commit{}, r
		}
		size = old.EventCount
	}
	if u.FirstLeafIndex > size {
		r := refuse(Precondition, ReasonLeafGap, "leaves start at index %d, %s holds %d", u.FirstLeafIndex, id, size)
		r.StoredEventCount = size
		return store.Commit{}, r
	}
	if err := in.checkOverlap(ctx, id, u, size); err != nil {
		return store.Commit{}, err
	}
	fresh := u.Leaves[size-u.FirstLeafIndex:]
	if len(fresh) > 0 && t.Heads > 0 && fresh[0].Sequence <= old.LastSequence {
		return store.Commit{}, refuse(Invalid, ReasonInvalidLeaves, "leaf %d has sequence %d, not after the stored last_sequence %d",
			fresh[0].LeafIndex, fresh[0].Sequence, old.LastSequence)
	}
	// Without new leaves, last_sequence is the stored last leaf's: another
	// one (the root and size unchanged) would break the proofs of that leaf
	// and refuse every later head.
	if len(fresh) == 0 && size > 0 && h.LastSequence != old.LastSequence {
		return store.Commit{}, refuse(Invalid, ReasonInvalidLeaves, "no new leaf, yet last_sequence %d differs from the stored %d",
			h.LastSequence, old.LastSequence)
	}
	// known holds the stored nodes read for the range and the nodes the
	// new leaves add: the consistency proof below needs no other.
	known := make(map[compact.NodeID][]byte)
	rng, err := in.storedRange(ctx, id, old, size, known)
	if err != nil {
		return store.Commit{}, err
	}
	nodes := make([]store.Node, 0, 2*len(fresh))
	visit := func(nid compact.NodeID, hash []byte) {
		known[nid] = hash
		nodes = append(nodes, store.Node{ID: nid, Hash: hash})
	}
	for _, l := range fresh {
		if err := rng.Append(l.LeafHash, visit); err != nil {
			return store.Commit{}, fmt.Errorf("ingest: %w", err)
		}
	}
	root, err := rootOf(rng)
	if err != nil {
		return store.Commit{}, err
	}
	if got := hex.EncodeToString(root); got != h.MerkleRoot {
		return store.Commit{}, refuse(Invalid, ReasonRootMismatch, "the stored and uploaded leaves of %s rebuild root %s, the head has %s",
			id, got, h.MerkleRoot)
	}
	if t.Heads > 0 {
		if err := in.checkConsistency(ctx, id, old, h, known); err != nil {
			return store.Commit{}, err
		}
	}
	// The leaves are kept as long as the heads, whatever the appliance's
	// body retention (u.LeafRetentionDays): a proof outlives the bodies.
	keep, err := store.LeavesKeptDays(id.Day)
	if err != nil {
		return store.Commit{}, err
	}
	return store.Commit{Head: h, PrevHeads: t.Heads, Leaves: fresh, Nodes: nodes, LeafRetentionDays: keep}, nil
}

// signedBefore reports whether h was signed before old (both verified, so
// their signed_at parse).
func signedBefore(h, old head.Head) bool {
	a, err1 := h.SignedTime()
	b, err2 := old.SignedTime()
	return err1 == nil && err2 == nil && a.Before(b)
}

// checkOverlap checks that uploaded leaves below size are the stored ones.
func (in *Ingester) checkOverlap(ctx context.Context, id store.TreeID, u Upload, size uint64) error {
	if u.FirstLeafIndex >= size {
		return nil
	}
	stored, err := in.opts.Store.Leaves(ctx, id, u.FirstLeafIndex, size)
	if err != nil {
		return storeErr("read stored leaves", err)
	}
	if uint64(len(stored)) != size-u.FirstLeafIndex {
		return fmt.Errorf("ingest: %s holds %d leaves from %d, want %d", id, len(stored), u.FirstLeafIndex, size-u.FirstLeafIndex)
	}
	for i, s := range stored {
		l := u.Leaves[i]
		if l.RequestID != s.RequestID || l.Sequence != s.Sequence || !bytes.Equal(l.LeafHash, s.LeafHash) {
			return refuse(Invalid, ReasonLeafMismatch, "leaf %d (%s, sequence %d) differs from the stored one (%s, sequence %d)",
				l.LeafIndex, l.RequestID, l.Sequence, s.RequestID, s.Sequence)
		}
	}
	return nil
}

// storedRange returns the compact range of the stored tree of size leaves,
// checked against the stored head's root, and records the nodes it read in
// known.
func (in *Ingester) storedRange(ctx context.Context, id store.TreeID, old head.Head, size uint64, known map[compact.NodeID][]byte) (*compact.Range, error) {
	if size == 0 {
		return ranges.NewEmptyRange(0), nil
	}
	nids := compact.RangeNodes(0, size, nil)
	hashes, err := in.opts.Store.Nodes(ctx, id, nids)
	if err != nil {
		return nil, storeErr("read the stored tree", err)
	}
	for i, nid := range nids {
		known[nid] = hashes[i]
	}
	rng, err := ranges.NewRange(0, size, hashes)
	if err != nil {
		return nil, fmt.Errorf("ingest: stored tree of %s: %w", id, err)
	}
	root, err := rootOf(rng)
	if err != nil {
		return nil, err
	}
	if hex.EncodeToString(root) != old.MerkleRoot {
		return nil, fmt.Errorf("ingest: the stored tree of %s does not rebuild its head's root", id)
	}
	return rng, nil
}

// checkConsistency verifies the RFC 6962 consistency proof from the stored
// head to the new one, built from the nodes already known (the stored
// range and the nodes just added), reading any other from the store.
func (in *Ingester) checkConsistency(ctx context.Context, id store.TreeID, old, h head.Head, known map[compact.NodeID][]byte) error {
	var hashes [][]byte
	if old.EventCount > 0 && old.EventCount < h.EventCount {
		pn, err := proof.Consistency(old.EventCount, h.EventCount)
		if err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
		raw := make([][]byte, len(pn.IDs))
		var missing []compact.NodeID
		for i, nid := range pn.IDs {
			if raw[i] = known[nid]; raw[i] == nil {
				missing = append(missing, nid)
			}
		}
		if len(missing) > 0 {
			got, err := in.opts.Store.Nodes(ctx, id, missing)
			if err != nil {
				return storeErr("read nodes for consistency", err)
			}
			for i, j := 0, 0; i < len(raw); i++ {
				if raw[i] == nil {
					raw[i], j = got[j], j+1
				}
			}
		}
		if hashes, err = pn.Rehash(raw, rfc6962.DefaultHasher.HashChildren); err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
	}
	if err := head.VerifyConsistency(old, h, hashes); err != nil {
		return &Refusal{Class: Invalid, Reason: ReasonInconsistent, StoredEventCount: old.EventCount, Err: err}
	}
	return nil
}

// rootOf is the root of a range from 0; the empty tree's is SHA-256("").
func rootOf(rng *compact.Range) ([]byte, error) {
	if rng.End() == 0 {
		return rfc6962.DefaultHasher.EmptyRoot(), nil
	}
	root, err := rng.GetRootHash(nil)
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	return root, nil
}
