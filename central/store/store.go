// Package store defines what the central plane keeps: every appliance's
// signed heads (10 years), the evidence of forks (heads refused as
// inconsistent with their tree, kept as long as the heads of their tree)
// and the leaves (hashes and canonical leaves) and Merkle nodes needed to
// serve inclusion proofs: ingest commits them with the leaf retention that
// keeps them as long as the heads (LeavesKeptDays); a shorter one, which
// older planes gave, prunes them first. Two
// implementations pass the conformance suite in storetest: boltstore (an
// embedded bbolt file, the default) and pgstore (PostgreSQL).
//
// A store does not verify what it is given: the ingest package verifies a
// head and its leaves, then commits them in one transaction. A store only
// guarantees atomicity, the optimistic check of Commit.PrevHeads, that a
// request id appears once per tree, and that no commit adds to a tree
// whose leaves were pruned.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/transparency-dev/merkle/compact"

	"github.com/tollgate-dev/tollgate/audit/head"
)

// Errors callers tell apart with errors.Is.
var (
	// ErrNotFound: no such tree, leaf, request or node.
	ErrNotFound = errors.New("store: not found")
	// ErrConflict: the tree changed since it was read (Commit.PrevHeads).
	ErrConflict = errors.New("store: tree changed concurrently")
	// ErrDuplicateRequest: a leaf's request id is already in the tree.
	ErrDuplicateRequest = errors.New("store: request id already in the tree")
	// ErrPruned: the tree's leaves are past retention and deleted; its heads
	// remain.
	ErrPruned = errors.New("store: leaves pruned")
)

// HeadRetentionYears is how long heads are kept, counted from their day.
const HeadRetentionYears = 10

// TreeID names a tree: one tenant's events on one appliance in one UTC day.
type TreeID struct {
	TenantID    string
	ApplianceID string
	Day         string
}

// TreeOf returns the tree a head summarises.
func TreeOf(h head.Head) TreeID {
	return TreeID{TenantID: h.TenantID, ApplianceID: h.ApplianceID, Day: h.Day}
}

// Leaf is what is kept of one event: enough for its inclusion proof.
type Leaf struct {
	RequestID string
	Sequence  uint64
	LeafIndex uint64
	// LeafHash is the RFC 6962 leaf hash (32 bytes).
	LeafHash []byte
	// Leaf is the canonical leaf (RFC 8785 JSON, metadata and body
	// hashes), which hashes to LeafHash; empty when the appliance sent the
	// hash alone.
	Leaf []byte
}

// Node is the hash of a complete subtree (level 0: a leaf hash).
type Node struct {
	ID   compact.NodeID
	Hash []byte
}

// Tree is the stored state of a tree.
type Tree struct {
	// Head is the latest stored head.
	Head head.Head
	// Heads is how many heads are stored, Head being the last.
	Heads int
	// LeafRetentionDays is how long the tree's leaves are kept after its day.
	LeafRetentionDays int
	// LeavesPruned is set once the leaves and nodes are deleted.
	LeavesPruned bool
}

// Commit adds a verified head to its tree (store.TreeOf(Head)) with the
// leaves and nodes its growth brings, in one transaction.
type Commit struct {
	Head head.Head
	// PrevHeads is Tree.Heads as read before verifying (0 for a new tree);
	// Commit fails with ErrConflict if the tree has changed since.
	PrevHeads int
	// Leaves are the new leaves, indices from the previous head's
	// event_count up to Head.EventCount.
	Leaves []Leaf
	// Nodes are every complete subtree the new leaves complete, leaves
	// included.
	Nodes             []Node
	LeafRetentionDays int
}

// Proof is what an inclusion proof needs, read in one transaction: the
// tree's latest head, the leaf, and the RFC 6962 audit path of the leaf in
// a tree of Head.EventCount leaves.
type Proof struct {
	Head   head.Head
	Leaf   Leaf
	Hashes [][]byte
}

// Pruned counts what Prune deleted.
type Pruned struct {
	// Trees whose heads (and everything else) passed HeadRetentionYears.
	Trees int
	// LeafTrees whose leaves and nodes passed their retention.
	LeafTrees int
}

// Store keeps heads, leaves and nodes. Implementations are safe for
// concurrent use.
type Store interface {
	// Tree returns a tree's state; ErrNotFound when it has no head.
	Tree(ctx context.Context, id TreeID) (Tree, error)
	// Heads returns every stored head of a tree, oldest first (none: empty).
	Heads(ctx context.Context, id TreeID) ([]head.Head, error)
	// HeadAt returns a tree's n-th stored head, in commit order (0: the
	// first, Tree.Heads-1: the latest); ErrNotFound when it has no such
	// head. It reads that head alone.
	HeadAt(ctx context.Context, id TreeID, n int) (head.Head, error)
	// HeadsFrom returns a tree's stored heads numbered from on, in commit
	// order, at most limit of them (no bound when limit <= 0); empty when
	// none. It reads only what it returns.
	HeadsFrom(ctx context.Context, id TreeID, from, limit int) ([]head.Head, error)
	// Consistency returns, read in one transaction, the first stored head
	// of from leaves, the latest of to leaves (LatestSize: the tree's
	// latest head) and the RFC 6962 consistency proof between them
	// (ReadConsistency); from is at most to. ErrNotFound when the tree has
	// no head, a *SizeError when it has none of a size, ErrPruned when
	// the proof needs the tree's nodes and its leaves are pruned.
	Consistency(ctx context.Context, id TreeID, from, to uint64) (Consistency, error)
	// Nodes returns the hashes of the given nodes, in order; ErrNotFound if
	// one is missing, ErrPruned once the tree's leaves are pruned.
	Nodes(ctx context.Context, id TreeID, ids []compact.NodeID) ([][]byte, error)
	// Leaves returns the stored leaves with index in [from, to), in order
	// (fewer when the tree holds fewer); ErrPruned once pruned.
	Leaves(ctx context.Context, id TreeID, from, to uint64) ([]Leaf, error)
	// Proof returns the inclusion proof material of a request's leaf;
	// ErrNotFound when the tree or the request is unknown, ErrPruned once
	// the leaves are pruned.
	Proof(ctx context.Context, id TreeID, requestID string) (Proof, error)
	// Commit stores a head with its leaves and nodes (see Commit).
	// ErrConflict, ErrDuplicateRequest, or ErrPruned when the tree's
	// leaves were pruned (since the caller read it), leave the store
	// unchanged.
	Commit(ctx context.Context, c Commit) error
	// LatestHeads returns the latest head of each appliance's tree of a
	// tenant and day, ordered by appliance id (bytewise): those whose
	// appliance id is greater than after (every one when after is empty),
	// at most limit of them (no bound when limit <= 0). It reads only
	// what it returns, so that a page costs its size, not the day's.
	LatestHeads(ctx context.Context, tenantID, day, after string, limit int) ([]head.Head, error)
	// RecordFork keeps the evidence of a fork of f.Tree(), a tree with a
	// stored head, once: it reports false, recording nothing, when the
	// tree holds a fork of the same refused head already (ForkDigest),
	// and fails with ErrForkLimit when it holds maxPerTree forks (no
	// bound when maxPerTree <= 0). The store numbers the fork
	// (Fork.Number); ErrNotFound when the tree has no head.
	RecordFork(ctx context.Context, f Fork, maxPerTree int) (bool, error)
	// Forks returns a tenant's forks that q selects, by number (the order
	// they were recorded in), at most q.Limit of them; empty when none.
	Forks(ctx context.Context, tenantID string, q ForkQuery) ([]Fork, error)
	// Prune deletes, as of now, trees whose day is more than
	// HeadRetentionYears old, their forks with them, and the leaves and
	// nodes of trees whose day ended more than their LeafRetentionDays
	// ago (their forks are kept).
	Prune(ctx context.Context, now time.Time) (Pruned, error)
	// Ping answers nil when the store can serve reads and commits: a
	// cheap round trip to its database within ctx, or nothing once an
	// embedded file is open. The plane's readiness route asks it.
	Ping(ctx context.Context) error
	Close() error
}

// String is tenant/appliance/day.
func (id TreeID) String() string { return id.TenantID + "/" + id.ApplianceID + "/" + id.Day }
