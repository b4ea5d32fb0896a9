package ingest

import (
	"context"
	"errors"
	"time"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/store"
)

// What became of a fork's evidence (Refusal.Evidence).
const (
	// EvidenceRecorded: stored (store.Store.RecordFork).
	EvidenceRecorded = "recorded"
	// EvidenceDuplicate: the same refused head was stored already.
	EvidenceDuplicate = "duplicate"
	// EvidenceOverLimit: the tree holds the most forks kept of it
	// (Options.MaxForksPerTree); not stored, logged.
	EvidenceOverLimit = "over_limit"
	// EvidenceFailed: the store failed; not stored, logged.
	EvidenceFailed = "failed"
)

// Evidences are every outcome of keeping a fork's evidence, a bounded set
// (metrics label them with it).
var Evidences = []string{EvidenceRecorded, EvidenceDuplicate, EvidenceOverLimit, EvidenceFailed}

// recordTimeout bounds the store write of a fork's evidence. The write
// does not end with the upload's context: an appliance that hangs up at
// once must not keep its fork out of the store. The upload holds its
// slot (the per-appliance and the plane's bound) while it waits, so the
// bound is short: a write that takes longer than 5 s is a store in
// trouble, answered as one that fails (EvidenceFailed, logged with both
// heads in full), and the head is refused as inconsistent all the same.
const recordTimeout = 5 * time.Second

// recordFork stores the evidence of the fork r refused h for, when r
// holds a ForkError (a head no larger than the stored tree, whose stored
// head and root are known), and sets r.Evidence to what became of it.
// It is one store write; whatever it meets, h stays refused.
func (in *Ingester) recordFork(ctx context.Context, peer string, h head.Head, r *Refusal) error {
	f, ok := errors.AsType[*ForkError](r.Err)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	recorded, err := in.opts.Store.RecordFork(ctx, store.Fork{
		Head: h, Stored: f.Stored, StoredRoot: f.StoredRoot, FromNodes: f.FromNodes,
		ConsistencyProof: f.ConsistencyProof, ReceivedAt: in.opts.Now(),
	}, in.opts.MaxForksPerTree)
	switch {
	case errors.Is(err, store.ErrForkLimit):
		r.Evidence = EvidenceOverLimit
		in.opts.Logger.WarnContext(ctx, "central: fork evidence not kept, the tree holds the most forks kept of it",
			"appliance_id", peer, "tree", store.TreeOf(h).String(), "max_forks_per_tree", in.opts.MaxForksPerTree)
		return nil
	case err != nil:
		r.Evidence = EvidenceFailed
		return err
	case recorded:
		r.Evidence = EvidenceRecorded
	default:
		r.Evidence = EvidenceDuplicate
	}
	return nil
}
