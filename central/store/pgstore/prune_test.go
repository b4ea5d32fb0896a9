package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/central/store/pgstore"
)

// commitOf is a commit of a tree of n leaves (the store verifies nothing)
// adding leaf n-1.
func commitOf(n int, prevHeads, retention int) store.Commit {
	l := store.Leaf{RequestID: "req_" + string(rune('a'+n)), Sequence: uint64(n), LeafIndex: uint64(n - 1),
		LeafHash: rfc6962.DefaultHasher.HashLeaf([]byte{byte(n)})}
	return store.Commit{
		Head: head.Head{TenantID: "acme", ApplianceID: "app_one", Day: "2026-03-01", EventCount: uint64(n),
			LastSequence: uint64(n), MerkleRoot: head.EmptyRoot(), Signature: "sig", SignedAt: "2026-03-01T12:00:00Z", Certificate: "cert"},
		PrevHeads: prevHeads, Leaves: []store.Leaf{l},
		Nodes:             []store.Node{{ID: compact.NewNodeID(0, l.LeafIndex), Hash: l.LeafHash}},
		LeafRetentionDays: retention,
	}
}

// TestPruneRechecksExpiry: a head committed while Prune runs, which
// extends the tree's leaf retention, keeps its leaves. Prune used to
// delete, by the id it had scanned, the leaves of a tree that was no
// longer expired, and mark it pruned, so that its proofs answered 410 for
// the rest of the new retention and it took no further head.
func TestPruneRechecksExpiry(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	if err := s.Commit(ctx, commitOf(1, 0, 30)); err != nil {
		t.Fatal(err)
	}
	expire, _ := store.LeavesExpire("2026-03-01", 30)
	pgstore.SetAfterPruneScan(t, func() {
		if err := s.Commit(ctx, commitOf(2, 1, 60)); err != nil {
			t.Errorf("commit during prune: %v", err)
		}
	})
	p, err := s.Prune(ctx, expire.Add(time.Second))
	if err != nil || p != (store.Pruned{}) {
		t.Errorf("Prune = %+v, %v; want nothing pruned", p, err)
	}
	id := store.TreeID{TenantID: "acme", ApplianceID: "app_one", Day: "2026-03-01"}
	tr, err := s.Tree(ctx, id)
	if err != nil || tr.LeavesPruned || tr.LeafRetentionDays != 60 {
		t.Fatalf("tree after prune: %+v, %v", tr, err)
	}
	if leaves, err := s.Leaves(ctx, id, 0, 10); err != nil || len(leaves) != 2 {
		t.Fatalf("leaves after prune: %d, %v", len(leaves), err)
	}
	if _, err := s.Proof(ctx, id, "req_b"); errors.Is(err, store.ErrPruned) {
		t.Fatalf("proof after prune: %v", err)
	}
}

// twoLeavesDueToPrune stores a tree of two leaves kept 30 days, and
// returns the store, the tree and a function that prunes it (as the time
// its leaves expire), failing the test unless exactly that tree was
// pruned; during names what the prune interrupts.
func twoLeavesDueToPrune(t *testing.T) (store.Store, store.TreeID, func(during string)) {
	t.Helper()
	s := open(t)
	ctx := context.Background()
	for n := 1; n <= 2; n++ {
		if err := s.Commit(ctx, commitOf(n, n-1, 30)); err != nil {
			t.Fatal(err)
		}
	}
	expire, _ := store.LeavesExpire("2026-03-01", 30)
	prune := func(during string) {
		if p, err := s.Prune(ctx, expire); err != nil || p.LeafTrees != 1 {
			t.Errorf("prune during %s: %+v, %v", during, p, err)
		}
	}
	return s, store.TreeID{TenantID: "acme", ApplianceID: "app_one", Day: "2026-03-01"}, prune
}

// TestProofDuringPrune: a proof whose tree's leaves are pruned while it is
// read fails with ErrPruned (HTTP 410 proof_expired), as it does on the
// embedded store, which reads in one transaction; it used to fail with
// ErrNotFound for the nodes, which the API answers 404 request_not_found.
func TestProofDuringPrune(t *testing.T) {
	s, id, prune := twoLeavesDueToPrune(t)
	ctx := context.Background()
	pgstore.SetAfterProofHead(t, func() { prune("the proof") })
	if _, err := s.Proof(ctx, id, "req_b"); !errors.Is(err, store.ErrPruned) {
		t.Fatalf("proof pruned while read: %v, want ErrPruned", err)
	}
}

// TestNodesAndLeavesDuringPrune: Nodes and Leaves read the tree's check and
// its rows in one snapshot, as the embedded store does in one transaction:
// a prune committed between the two neither makes a node missing
// (ErrNotFound, which ingest reports as an internal error) nor shortens
// the leaves. Once the prune is done, both answer ErrPruned.
func TestNodesAndLeavesDuringPrune(t *testing.T) {
	s, id, prune := twoLeavesDueToPrune(t)
	ctx := context.Background()
	nodes := []compact.NodeID{compact.NewNodeID(0, 0), compact.NewNodeID(0, 1)}
	pruned := false
	pgstore.SetAfterLeavesRow(t, func() {
		if !pruned {
			pruned = true
			prune("the read")
		}
	})
	if got, err := s.Nodes(ctx, id, nodes); err != nil || len(got) != 2 {
		t.Fatalf("nodes pruned while read: %d, %v; want both, as of the read's snapshot", len(got), err)
	}
	if !pruned {
		t.Fatal("the prune did not run during the read")
	}
	if _, err := s.Nodes(ctx, id, nodes); !errors.Is(err, store.ErrPruned) {
		t.Fatalf("nodes after the prune: %v, want ErrPruned", err)
	}
	if _, err := s.Leaves(ctx, id, 0, 10); !errors.Is(err, store.ErrPruned) {
		t.Fatalf("leaves after the prune: %v, want ErrPruned", err)
	}
}

// TestLeavesDuringPrune is TestNodesAndLeavesDuringPrune's first half for
// Leaves.
func TestLeavesDuringPrune(t *testing.T) {
	s, id, prune := twoLeavesDueToPrune(t)
	ctx := context.Background()
	pgstore.SetAfterLeavesRow(t, func() { prune("the read") })
	if got, err := s.Leaves(ctx, id, 0, 10); err != nil || len(got) != 2 {
		t.Fatalf("leaves pruned while read: %d, %v; want both, as of the read's snapshot", len(got), err)
	}
}
