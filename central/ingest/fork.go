package ingest

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/store"
)

// ForkError is why a head was refused as inconsistent when it is no larger
// than the stored tree and its root is not the stored tree's root at its
// size: the appliance (or whoever holds its key) signed two heads that
// disagree about the same leaves.
type ForkError struct {
	// EventCount and MerkleRoot are the refused head's.
	EventCount uint64
	MerkleRoot string
	// StoredRoot is the stored tree's root at EventCount leaves; Stored is
	// the stored head it was read from, of that size, or the latest stored
	// head when it was rebuilt from the stored nodes (FromNodes).
	StoredRoot string
	Stored     head.Head
	FromNodes  bool
	// ConsistencyProof, when FromNodes, is the RFC 6962 consistency proof
	// from StoredRoot at EventCount leaves to Stored, built from the
	// stored nodes and verified (store.Fork.ConsistencyProof).
	ConsistencyProof [][]byte
}

func (e *ForkError) Error() string {
	return fmt.Sprintf("head of %d events has root %s, the stored tree of %d events has root %s at that size",
		e.EventCount, e.MerkleRoot, e.Stored.EventCount, e.StoredRoot)
}

// checkFork checks a head h no larger than the latest stored head of t
// against the stored tree: its root must be the stored tree's root at its
// size, read from the stored head of that size (the latest, or same, an
// earlier one that stored read), or else rebuilt from the stored
// complete-subtree nodes covering [0, size), with the consistency proof
// from that root to the latest stored head, which the fork's evidence
// keeps in place of the nodes (forkProof). A tree whose leaves were
// pruned has no nodes: a head of a size with no stored head cannot be
// checked there, and is answered as before.
func (in *Ingester) checkFork(ctx context.Context, t store.Tree, h head.Head, same *head.Head) error {
	e := &ForkError{EventCount: h.EventCount, MerkleRoot: h.MerkleRoot, Stored: t.Head}
	switch {
	case h.EventCount == t.Head.EventCount:
		e.StoredRoot = t.Head.MerkleRoot
	case same != nil:
		e.StoredRoot, e.Stored = same.MerkleRoot, *same
	case t.LeavesPruned:
		return nil
	default:
		root, err := in.rootAt(ctx, store.TreeOf(h), h.EventCount)
		if errors.Is(err, store.ErrPruned) {
			return nil
		}
		if err != nil {
			return err
		}
		e.StoredRoot, e.FromNodes = root, true
	}
	if e.StoredRoot == h.MerkleRoot {
		return nil
	}
	if e.FromNodes {
		var err error
		e.ConsistencyProof, err = in.forkProof(ctx, store.TreeOf(h), e.EventCount, e.StoredRoot, t.Head)
		if errors.Is(err, store.ErrPruned) {
			// Pruned since the root was rebuilt: as in a pruned tree.
			return nil
		}
		if err != nil {
			return err
		}
	}
	return &Refusal{Class: Invalid, Reason: ReasonInconsistent, StoredEventCount: t.Head.EventCount, Err: e}
}

// rootAt is the hex root of the stored tree's first size leaves, rebuilt
// from the stored nodes of the compact range [0, size).
func (in *Ingester) rootAt(ctx context.Context, id store.TreeID, size uint64) (string, error) {
	if size == 0 {
		return head.EmptyRoot(), nil
	}
	nids := compact.RangeNodes(0, size, nil)
	hashes, err := in.opts.Store.Nodes(ctx, id, nids)
	if err != nil {
		return "", storeErr("read the stored tree", err)
	}
	rng, err := ranges.NewRange(0, size, hashes)
	if err != nil {
		return "", fmt.Errorf("ingest: stored tree of %s: %w", id, err)
	}
	root, err := rootOf(rng)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(root), nil
}

// forkProof is the RFC 6962 consistency proof from the stored tree's root
// at size leaves, root (hex, rebuilt from the stored nodes), to the stored
// head latest, built from the stored nodes and verified against both, so
// that a fork's evidence holds what proves root without the nodes, which
// leaf retention deletes. A proof that does not verify means the stored
// nodes are not those of the stored head: an error, not a fork.
func (in *Ingester) forkProof(ctx context.Context, id store.TreeID, size uint64, root string, latest head.Head) ([][]byte, error) {
	hashes, err := store.ConsistencyHashes(size, latest.EventCount, func(ids []compact.NodeID) ([][]byte, error) {
		return in.opts.Store.Nodes(ctx, id, ids)
	})
	if err != nil {
		return nil, storeErr("read nodes for the fork's consistency proof", err)
	}
	r1, err := hex.DecodeString(root)
	if err != nil {
		return nil, fmt.Errorf("ingest: stored root of %s: %w", id, err)
	}
	r2, err := latest.Root()
	if err != nil {
		return nil, fmt.Errorf("ingest: stored head of %s: %w", id, err)
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, size, latest.EventCount, hashes, r1, r2); err != nil {
		return nil, fmt.Errorf("ingest: the stored nodes of %s do not prove its head of %d leaves from %d: %w", id, latest.EventCount, size, err)
	}
	return hashes, nil
}
