// Package ingest verifies a head an appliance publishes, with the leaves
// that came with it, and stores it: the head's signature and certificate
// (valid at signed_at, chained to the fleet CA, naming the publishing
// appliance), that the leaves rebuild the head's root, and that the head
// extends the stored head of its tree (RFC 6962 consistency). A head that
// fails is refused with a reason and logged; nothing stored changes, but
// for the evidence of a fork: a head that contradicts the stored tree is
// kept with the stored head it contradicts (store.Store.RecordFork).
package ingest

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"hash/maphash"
	"log/slog"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/store"
)

// DefaultMaxSkew is how far in the future of the central clock a head's
// signed_at may be.
const DefaultMaxSkew = 5 * time.Minute

// Options configure an Ingester.
type Options struct {
	// CA is the fleet CA certificate appliance certificates chain to.
	CA    *x509.Certificate
	Store store.Store
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MaxSkew bounds signed_at in the future; 0 means DefaultMaxSkew.
	MaxSkew time.Duration
	// MaxForksPerTree bounds the forks whose evidence is kept per tree
	// (0: store.DefaultMaxForksPerTree).
	MaxForksPerTree int
	Logger          *slog.Logger
}

// Upload is one published head and the leaves that follow it: leaves
// [FirstLeafIndex, Head.EventCount) of its tree, in order.
type Upload struct {
	Head              head.Head
	FirstLeafIndex    uint64
	Leaves            []store.Leaf
	LeafRetentionDays int
}

// Result is the outcome of an accepted upload.
type Result struct {
	// EventCount is the event_count of the tree's latest stored head.
	EventCount uint64
	// Duplicate is set when the head was stored already, or says nothing
	// the stored latest head does not and was not stored (a head of the
	// same size, not final, signed again).
	Duplicate bool
	// Leaves is how many leaves were stored: those new to the tree (0
	// for a duplicate).
	Leaves int
}

// Ingester verifies and stores heads. Safe for concurrent use; uploads of
// one tree are serialised in this process, and the store's optimistic
// check catches another process.
type Ingester struct {
	opts  Options
	seed  maphash.Seed
	locks [64]sync.Mutex
}

// New returns an Ingester.
func New(opts Options) (*Ingester, error) {
	if opts.CA == nil || opts.Store == nil {
		return nil, errors.New("ingest: a fleet CA certificate and a store are required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxSkew <= 0 {
		opts.MaxSkew = DefaultMaxSkew
	}
	if opts.MaxForksPerTree <= 0 {
		opts.MaxForksPerTree = store.DefaultMaxForksPerTree
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Ingester{opts: opts, seed: maphash.MakeSeed()}, nil
}

// Publish verifies an upload from the appliance peer (the id of its
// authenticated certificate) and stores it. It returns a *Refusal when the
// head is refused, another error when the store failed.
func (in *Ingester) Publish(ctx context.Context, peer string, u Upload) (Result, error) {
	res, err := in.publish(ctx, peer, u)
	id := store.TreeOf(u.Head)
	switch r, refused := AsRefusal(err); {
	case refused && r.Reason == ReasonInconsistent:
		// The evidence first, so that the log line says what became of
		// it; the head is refused whatever the store answers.
		if rerr := in.recordFork(ctx, peer, u.Head, r); rerr != nil {
			in.opts.Logger.ErrorContext(ctx, "central: storing fork evidence failed", "appliance_id", peer, "tree", id.String(), "err", rerr)
		}
		in.logInconsistent(ctx, peer, u.Head, r)
	case refused:
		in.opts.Logger.WarnContext(ctx, "central: head refused", "appliance_id", peer, "tree", id.String(),
			"event_count", u.Head.EventCount, "signed_at", u.Head.SignedAt, "reason", r.Reason, "err", r.Err)
	case err != nil:
		in.opts.Logger.ErrorContext(ctx, "central: storing head failed", "appliance_id", peer, "tree", id.String(), "err", err)
	case !res.Duplicate:
		in.opts.Logger.DebugContext(ctx, "central: head stored", "tree", id.String(), "event_count", u.Head.EventCount,
			"leaves", len(u.Leaves), "signed_at", u.Head.SignedAt)
	}
	return res, err
}

// logInconsistent logs a head refused as inconsistent as an error: the
// appliance signed a head that disagrees with one it signed before (or
// with the leaves it sent before). The line carries the refused signed
// head in full, and the stored one it contradicts, and what became of the
// evidence in the store (evidence: recorded, duplicate, over_limit or
// failed; absent when it is not kept, for a larger head).
func (in *Ingester) logInconsistent(ctx context.Context, peer string, h head.Head, r *Refusal) {
	args := []any{"appliance_id", peer, "tenant_id", h.TenantID, "day", h.Day, "tree", store.TreeOf(h).String(),
		"reason", r.Reason, "event_count", h.EventCount, "merkle_root", h.MerkleRoot, "stored_event_count", r.StoredEventCount}
	if f, ok := errors.AsType[*ForkError](r.Err); ok {
		args = append(args, "stored_root", f.StoredRoot, "stored_root_from_nodes", f.FromNodes,
			"stored_head", headJSON(f.Stored))
	}
	if r.Evidence != "" {
		args = append(args, "evidence", r.Evidence)
	}
	args = append(args, "signed_head", headJSON(h), "err", r.Err)
	in.opts.Logger.ErrorContext(ctx, "central: head refused, inconsistent with the stored tree", args...)
}

// headJSON is h as its JSON document, for a log line.
func headJSON(h head.Head) string {
	raw, err := json.Marshal(h)
	if err != nil {
		return err.Error()
	}
	return string(raw)
}

func (in *Ingester) publish(ctx context.Context, peer string, u Upload) (Result, error) {
	if err := in.checkHead(peer, u.Head); err != nil {
		return Result{}, err
	}
	if err := checkLeaves(u); err != nil {
		return Result{}, err
	}
	id := store.TreeOf(u.Head)
	mu := &in.locks[maphash.String(in.seed, id.String())%uint64(len(in.locks))]
	mu.Lock()
	defer mu.Unlock()
	t, err := in.opts.Store.Tree(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		t = store.Tree{}
	case err != nil:
		return Result{}, err
	}
	if t.Heads > 0 {
		dup, same, err := in.stored(ctx, t, u.Head)
		if err != nil || dup {
			return Result{EventCount: t.Head.EventCount, Duplicate: dup}, err
		}
		// A head no larger than the stored one must agree with the stored
		// tree at its size, whatever else is wrong with it (stale, after
		// a final head): one that does not is evidence that the appliance
		// signed two views of the tree.
		if u.Head.EventCount <= t.Head.EventCount {
			if err := in.checkFork(ctx, t, u.Head, same); err != nil {
				return Result{}, err
			}
		}
	}
	c, err := in.extend(ctx, t, u)
	if err != nil {
		return Result{}, err
	}
	if t.Heads > 0 && !storedAnew(t.Head, u.Head) {
		in.opts.Logger.DebugContext(ctx, "central: head of the stored size accepted, not stored again", "tree", id.String(),
			"event_count", u.Head.EventCount, "signed_at", u.Head.SignedAt, "stored_signed_at", t.Head.SignedAt)
		return Result{EventCount: t.Head.EventCount, Duplicate: true}, nil
	}
	switch err := in.opts.Store.Commit(ctx, c); {
	case errors.Is(err, store.ErrConflict):
		return Result{}, &Refusal{Class: Conflict, Reason: ReasonConflict, StoredEventCount: t.Head.EventCount, Err: err}
	case errors.Is(err, store.ErrDuplicateRequest):
		return Result{}, &Refusal{Class: Invalid, Reason: ReasonDuplicateRequestID, StoredEventCount: t.Head.EventCount, Err: err}
	case errors.Is(err, store.ErrPruned):
		// Pruned between the read above and the commit.
		return Result{}, &Refusal{Class: Precondition, Reason: ReasonLeavesPruned, StoredEventCount: t.Head.EventCount, Err: err}
	case err != nil:
		return Result{}, err
	}
	return Result{EventCount: u.Head.EventCount, Leaves: len(c.Leaves)}, nil
}

// storedAnew reports whether h, which extend accepted after the latest
// stored head old, is stored as a head of its own: one that grows the
// tree, or the day's final head. A head of the stored size that is not
// final says nothing the stored one does not (extend checked that its
// root and last_sequence are the stored ones, and that it is not signed
// before it): only its signature, signed_at and certificate differ, and
// an appliance signs no such head (it signs a head when its tree grew,
// and one final head when the day closes). It is accepted as a duplicate
// rather than stored: each would be another head of the tree, which a
// certificate holder could otherwise add without end.
func storedAnew(old, h head.Head) bool {
	return h.EventCount > old.EventCount || h.Final()
}

// maxSameSize bounds how many stored heads of one size stored compares a
// head with. Ingest stores at most two heads of a size (one that grew the
// tree, and the day's final head); a tree stored before that rule may
// hold more, and a head identical to one past the bound is answered as if
// it were not stored (stale_head, or tree_final after a final head).
const maxSameSize = 8

// stored reports whether h is one of the tree's stored heads, and returns
// an earlier stored head of h's size when it read one (nil otherwise). The
// latest is in t. An earlier one has no more leaves than it, and as many
// only when the latest is the day's final head (storedAnew): it is looked
// up by its size. Each stored head extends the one before, so the heads
// are in the order of their sizes, and those of h's size are found by
// bisection, reading some log2(t.Heads) heads rather than all of them.
func (in *Ingester) stored(ctx context.Context, t store.Tree, h head.Head) (bool, *head.Head, error) {
	if t.Head == h {
		return true, nil, nil
	}
	if h.EventCount > t.Head.EventCount || (h.EventCount == t.Head.EventCount && !t.Head.Final()) {
		return false, nil, nil
	}
	id := store.TreeOf(h)
	// The first of the earlier heads with at least h's events.
	lo, hi := 0, t.Heads-1
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		s, err := in.opts.Store.HeadAt(ctx, id, mid)
		if err != nil {
			return false, nil, missing(err)
		}
		if s.EventCount < h.EventCount {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	var same *head.Head
	for n := lo; n < min(t.Heads-1, lo+maxSameSize); n++ {
		switch s, err := in.opts.Store.HeadAt(ctx, id, n); {
		case err != nil:
			return false, nil, missing(err)
		case s.EventCount != h.EventCount:
			return false, same, nil
		case s == h:
			return true, nil, nil
		case same == nil:
			same = &s
		}
	}
	return false, same, nil
}

// missing is err, or nil for ErrNotFound: a head of a tree read before is
// gone only with the whole tree (head retention), which then holds none.
func missing(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}
