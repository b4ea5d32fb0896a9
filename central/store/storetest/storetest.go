// Package storetest is the conformance suite every store.Store passes:
// run it from the implementation's tests with a function that opens an
// empty store.
package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/audit/leaf"
	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// Opener returns an empty store that lives until the test ends.
type Opener func(t *testing.T) store.Store

// RowCounter is implemented by a store whose tests can count what it
// holds of a tree's leaves (leaves, request index, nodes) in storage,
// including what its reads no longer show. The suite checks it where
// reads cannot tell, e.g. that a tree whose leaves were pruned holds none.
type RowCounter interface {
	StoredRows(ctx context.Context, id store.TreeID) (int, error)
}

// Run runs the suite, each test on a store of its own.
func Run(t *testing.T, open Opener) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, store.Store)
	}{
		{"CommitAndRead", testCommitAndRead},
		{"Proofs", testProofs},
		{"LatestHeads", testLatestHeads},
		{"LatestHeadsPages", testLatestHeadsPages},
		{"Conflict", testConflict},
		{"DuplicateRequest", testDuplicateRequest},
		{"ConcurrentCommits", testConcurrentCommits},
		{"PruneLeaves", testPruneLeaves},
		{"CommitAfterPrune", testCommitAfterPrune},
		{"PruneHeads", testPruneHeads},
		{"NotFound", testNotFound},
		{"ForkRecord", testForkRecord},
		{"ForkOnce", testForkOnce},
		{"ForkBound", testForkBound},
		{"ForkFilters", testForkFilters},
		{"ForkPages", testForkPages},
		{"PruneForks", testPruneForks},
		{"HeadsFrom", testHeadsFrom},
		{"Consistency", testConsistency},
		{"ConsistencyPruned", testConsistencyPruned},
		{"Ping", testPing},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, open(t))
		})
	}
}

var ranges = &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}

// tree builds the commits of one tree. Heads are not signed: a store does
// not verify them.
type tree struct {
	id     store.TreeID
	leaves []store.Leaf
	heads  int
	seq    uint64
}

func newTree(tenant, app, day string) *tree {
	return &tree{id: store.TreeID{TenantID: tenant, ApplianceID: app, Day: day}}
}

// grow adds n leaves and returns the commit of a head over all of them.
// Leaves of even index carry their canonical bytes, the others their hash
// alone, as an appliance that predates canonical leaves on the wire sends
// them: a store keeps both, and reads each back as it was given.
func (tr *tree) grow(n int) store.Commit {
	from := len(tr.leaves)
	for range n {
		tr.seq += 3
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		l := store.Leaf{
			RequestID: fmt.Sprintf("req_%x", b[:10]), Sequence: tr.seq,
			LeafIndex: uint64(len(tr.leaves)), LeafHash: rfc6962.DefaultHasher.HashLeaf(b),
		}
		if l.LeafIndex%2 == 0 {
			l.Leaf = canonicalLeaf(tr.id, l.RequestID, l.Sequence)
			l.LeafHash = leaf.Hash(l.Leaf)
		}
		tr.leaves = append(tr.leaves, l)
	}
	rng := ranges.NewEmptyRange(0)
	var nodes []store.Node
	for i, l := range tr.leaves {
		var visit compact.VisitFn
		if i >= from {
			visit = func(id compact.NodeID, h []byte) { nodes = append(nodes, store.Node{ID: id, Hash: h}) }
		}
		_ = rng.Append(l.LeafHash, visit)
	}
	root := head.EmptyRoot()
	if r, _ := rng.GetRootHash(nil); r != nil {
		root = hex.EncodeToString(r)
	}
	c := store.Commit{
		Head: head.Head{
			TenantID: tr.id.TenantID, ApplianceID: tr.id.ApplianceID, Day: tr.id.Day,
			EventCount: uint64(len(tr.leaves)), LastSequence: tr.seq, MerkleRoot: root,
			Signature: fmt.Sprintf("sig%d", tr.heads), SignedAt: head.FormatSignedAt(time.Now()), Certificate: "cert",
		},
		PrevHeads: tr.heads, Leaves: append([]store.Leaf(nil), tr.leaves[from:]...), Nodes: nodes, LeafRetentionDays: 90,
	}
	return c
}

// canonicalLeaf is the canonical leaf of an event of a tree, as an
// appliance writes it: a chat request with a policy decision, a model id
// of a common length and random body hashes and salt.
func canonicalLeaf(id store.TreeID, requestID string, seq uint64) []byte {
	rnd := make([]byte, 80)
	_, _ = rand.Read(rnd)
	b, err := leaf.Canonical(leaf.Leaf{
		Schema: leaf.Schema, RequestID: requestID, Sequence: seq, TenantID: id.TenantID, ApplianceID: id.ApplianceID,
		KeyID: "key_" + hex.EncodeToString(rnd[:12]), Time: leaf.FormatTime(time.Now()), Endpoint: "/v1/chat/completions",
		Model: "meta-llama/Llama-3.1-8B-Instruct", Status: 200, PromptTokens: 1234, CompletionTokens: 321,
		PolicyDecisionID: "dec_" + hex.EncodeToString(rnd[12:28]),
		RequestSHA256:    hex.EncodeToString(rnd[28:60]), ResponseSHA256: hex.EncodeToString(rnd[48:80]), Salt: hex.EncodeToString(rnd[60:76]),
	})
	if err != nil {
		panic(err) // the members above are well-formed
	}
	return b
}

func (tr *tree) commit(t *testing.T, s store.Store, n int) store.Commit {
	t.Helper()
	c := tr.grow(n)
	if err := s.Commit(context.Background(), c); err != nil {
		t.Fatalf("commit %d leaves to %s: %v", n, tr.id, err)
	}
	tr.heads++
	return c
}

func today() string { return ids.Day(time.Now()) }

func testCommitAndRead(t *testing.T, s store.Store) {
	ctx := context.Background()
	tr := newTree("acme", "app_one", today())
	c1 := tr.commit(t, s, 3)
	c2 := tr.commit(t, s, 4)
	c3 := tr.commit(t, s, 0) // a head at the same size
	got, err := s.Tree(ctx, tr.id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Head != c3.Head || got.Heads != 3 || got.LeafRetentionDays != 90 || got.LeavesPruned {
		t.Fatalf("Tree = %+v", got)
	}
	heads, err := s.Heads(ctx, tr.id)
	if err != nil || !reflect.DeepEqual(heads, []head.Head{c1.Head, c2.Head, c3.Head}) {
		t.Fatalf("Heads = %v, %v", heads, err)
	}
	for n, want := range heads {
		if h, err := s.HeadAt(ctx, tr.id, n); err != nil || h != want {
			t.Fatalf("HeadAt(%d) = %+v, %v; want %+v", n, h, err, want)
		}
	}
	for _, n := range []int{-1, len(heads)} {
		if _, err := s.HeadAt(ctx, tr.id, n); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("HeadAt(%d) of %d heads: %v, want ErrNotFound", n, len(heads), err)
		}
	}
	other := tr.id
	other.ApplianceID = "app_other"
	if _, err := s.HeadAt(ctx, other, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("HeadAt of a tree without heads: %v, want ErrNotFound", err)
	}
	leaves, err := s.Leaves(ctx, tr.id, 2, 5)
	if err != nil || !reflect.DeepEqual(leaves, tr.leaves[2:5]) {
		t.Fatalf("Leaves(2, 5) = %v, %v", leaves, err)
	}
	if leaves, err = s.Leaves(ctx, tr.id, 5, 100); err != nil || len(leaves) != 2 {
		t.Fatalf("Leaves past the end = %v, %v", leaves, err)
	}
	ids := compact.RangeNodes(0, 7, nil)
	hashes, err := s.Nodes(ctx, tr.id, ids)
	if err != nil || len(hashes) != len(ids) {
		t.Fatalf("Nodes = %v, %v", hashes, err)
	}
	rng, err := ranges.NewRange(0, 7, hashes)
	if err != nil {
		t.Fatal(err)
	}
	if root, _ := rng.GetRootHash(nil); hex.EncodeToString(root) != c3.Head.MerkleRoot {
		t.Fatal("the stored compact range does not rebuild the root")
	}
	if _, err := s.Nodes(ctx, tr.id, []compact.NodeID{compact.NewNodeID(0, 7)}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a node past the tree: %v", err)
	}
}

func testProofs(t *testing.T, s store.Store) {
	ctx := context.Background()
	tr := newTree("acme", "app_one", today())
	for _, n := range []int{1, 6, 9} {
		tr.commit(t, s, n)
		latest, _ := s.Tree(ctx, tr.id)
		root, _ := latest.Head.Root()
		for _, l := range tr.leaves {
			p, err := s.Proof(ctx, tr.id, l.RequestID)
			if err != nil {
				t.Fatal(err)
			}
			if p.Head != latest.Head || !reflect.DeepEqual(p.Leaf, l) {
				t.Fatalf("Proof of %s: head %+v leaf %+v", l.RequestID, p.Head, p.Leaf)
			}
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, l.LeafIndex, p.Head.EventCount, l.LeafHash, p.Hashes, root); err != nil {
				t.Fatalf("leaf %d of %d: %v", l.LeafIndex, p.Head.EventCount, err)
			}
		}
	}
}

func testLatestHeads(t *testing.T, s store.Store) {
	ctx := context.Background()
	day := today()
	var want []head.Head
	for _, app := range []string{"app_a", "app_b", "app_c"} {
		tr := newTree("acme", app, day)
		tr.commit(t, s, 2)
		want = append(want, tr.commit(t, s, 1).Head)
	}
	newTree("acme", "app_a", "2020-01-01").commit(t, s, 1)
	newTree("acme-2", "app_a", day).commit(t, s, 1)
	newTree("acm", "app_a", day).commit(t, s, 1)
	got, err := s.LatestHeads(ctx, "acme", day, "", 0)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("LatestHeads = %v, %v; want %v", got, err, want)
	}
	if got, err = s.LatestHeads(ctx, "nobody", day, "", 0); err != nil || len(got) != 0 {
		t.Fatalf("LatestHeads of nobody = %v, %v", got, err)
	}
}

// testLatestHeadsPages: LatestHeads after an appliance id and with a
// limit returns the next heads in bytewise appliance id order (which is
// not a locale's: upper case before '_' before lower case, "app_a" before
// "app_a-"), and paging with every limit yields each head once.
func testLatestHeadsPages(t *testing.T, s store.Store) {
	ctx := context.Background()
	day := today()
	apps := []string{"app_-", "app_0", "app_B", "app_Z", "app__", "app_a", "app_a-", "app_a_", "app_b"}
	byApp := map[string]head.Head{}
	for _, i := range mathrand.Perm(len(apps)) { // committed in any order
		tr := newTree("acme", apps[i], day)
		tr.commit(t, s, 1)
		byApp[apps[i]] = tr.commit(t, s, 2).Head
	}
	newTree("acme", "app_c", "2020-01-01").commit(t, s, 1)
	newTree("acme-2", "app_c", day).commit(t, s, 1)
	newTree("acm", "app_c", day).commit(t, s, 1)

	for i, after := range append([]string{""}, apps...) {
		var want []head.Head
		for _, app := range apps[i:] {
			want = append(want, byApp[app])
		}
		got, err := s.LatestHeads(ctx, "acme", day, after, 0)
		if err != nil || len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
			t.Fatalf("LatestHeads after %q = %v, %v; want %v", after, got, err, want)
		}
		for limit := 1; limit <= len(want)+1; limit++ {
			got, err := s.LatestHeads(ctx, "acme", day, after, limit)
			n := min(limit, len(want))
			if err != nil || len(got) != n || (n > 0 && !reflect.DeepEqual(got, want[:n])) {
				t.Fatalf("LatestHeads after %q limit %d = %v, %v; want %v", after, limit, got, err, want[:n])
			}
		}
	}
	// An id that no tree has: the heads after it.
	got, err := s.LatestHeads(ctx, "acme", day, "app_a0", 2)
	if err != nil || len(got) != 2 || got[0] != byApp["app_a_"] || got[1] != byApp["app_b"] {
		t.Fatalf("LatestHeads after app_a0 = %v, %v", got, err)
	}
	// Past the last one: empty, not nil.
	if got, err := s.LatestHeads(ctx, "acme", day, "app_z", 5); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("LatestHeads after the last = %#v, %v", got, err)
	}
	// Paging with each limit yields every head once, in order.
	for limit := 1; limit <= len(apps); limit++ {
		var ids []string
		after := ""
		for {
			page, err := s.LatestHeads(ctx, "acme", day, after, limit)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range page {
				ids = append(ids, h.ApplianceID)
			}
			if len(page) < limit {
				break
			}
			after = page[len(page)-1].ApplianceID
		}
		if !reflect.DeepEqual(ids, apps) {
			t.Fatalf("pages of %d: %v; want %v", limit, ids, apps)
		}
	}
}

// unchanged checks that a failed commit left the tree as it was.
func unchanged(t *testing.T, s store.Store, tr *tree, before store.Tree) {
	t.Helper()
	after, err := s.Tree(context.Background(), tr.id)
	if err != nil || after != before {
		t.Fatalf("the tree changed: %+v -> %+v (%v)", before, after, err)
	}
	leaves, err := s.Leaves(context.Background(), tr.id, 0, 1<<30)
	if err != nil || uint64(len(leaves)) != before.Head.EventCount {
		t.Fatalf("leaves changed: %d, %v", len(leaves), err)
	}
}

func testConflict(t *testing.T, s store.Store) {
	tr := newTree("acme", "app_one", today())
	tr.commit(t, s, 2)
	before, _ := s.Tree(context.Background(), tr.id)
	c := tr.grow(2)
	c.PrevHeads = 0
	if err := s.Commit(context.Background(), c); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale PrevHeads: %v", err)
	}
	unchanged(t, s, tr, before)
	fresh := newTree("acme", "app_two", today())
	c = fresh.grow(1)
	c.PrevHeads = 1
	if err := s.Commit(context.Background(), c); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("PrevHeads 1 on a new tree: %v", err)
	}
	if _, err := s.Tree(context.Background(), fresh.id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused first commit left a tree: %v", err)
	}
}

func testDuplicateRequest(t *testing.T, s store.Store) {
	tr := newTree("acme", "app_one", today())
	tr.commit(t, s, 3)
	before, _ := s.Tree(context.Background(), tr.id)
	c := tr.grow(3)
	c.Leaves[2].RequestID = tr.leaves[0].RequestID
	if err := s.Commit(context.Background(), c); !errors.Is(err, store.ErrDuplicateRequest) {
		t.Fatalf("duplicate request id: %v", err)
	}
	unchanged(t, s, tr, before)
	// The same request id in another tree is fine.
	other := newTree("acme", "app_two", today())
	c = other.grow(1)
	c.Leaves[0].RequestID = tr.leaves[0].RequestID
	if err := s.Commit(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

// testConcurrentCommits: of commits racing from the same state, exactly one
// wins.
func testConcurrentCommits(t *testing.T, s store.Store) {
	tr := newTree("acme", "app_one", today())
	tr.commit(t, s, 1)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		c := tr.grow(1)
		tr.leaves = tr.leaves[:1] // every racer extends the same state
		wg.Go(func() { errs[i] = s.Commit(context.Background(), c) })
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrConflict):
			t.Fatalf("racing commit: %v", err)
		}
	}
	got, _ := s.Tree(context.Background(), tr.id)
	if won != 1 || got.Heads != 2 || got.Head.EventCount != 2 {
		t.Fatalf("%d commits won; tree %+v", won, got)
	}
}

func testPruneLeaves(t *testing.T, s store.Store) {
	ctx := context.Background()
	day := "2026-03-01"
	tr := newTree("acme", "app_one", day)
	c := tr.grow(4)
	c.LeafRetentionDays = 30
	if err := s.Commit(ctx, c); err != nil {
		t.Fatal(err)
	}
	keep := newTree("acme", "app_two", day)
	c = keep.grow(2)
	c.LeafRetentionDays = 60
	if err := s.Commit(ctx, c); err != nil {
		t.Fatal(err)
	}
	expire, _ := store.LeavesExpire(day, 30)
	if p, err := s.Prune(ctx, expire.Add(-time.Second)); err != nil || p != (store.Pruned{}) {
		t.Fatalf("prune before expiry: %+v, %v", p, err)
	}
	if p, err := s.Prune(ctx, expire); err != nil || p != (store.Pruned{LeafTrees: 1}) {
		t.Fatalf("prune at expiry: %+v, %v", p, err)
	}
	got, err := s.Tree(ctx, tr.id)
	if err != nil || !got.LeavesPruned || got.Head.EventCount != 4 {
		t.Fatalf("pruned tree: %+v, %v", got, err)
	}
	if _, err := s.Proof(ctx, tr.id, tr.leaves[0].RequestID); !errors.Is(err, store.ErrPruned) {
		t.Fatalf("Proof after prune: %v", err)
	}
	if _, err := s.Leaves(ctx, tr.id, 0, 4); !errors.Is(err, store.ErrPruned) {
		t.Fatalf("Leaves after prune: %v", err)
	}
	if _, err := s.Nodes(ctx, tr.id, []compact.NodeID{compact.NewNodeID(0, 0)}); !errors.Is(err, store.ErrPruned) {
		t.Fatalf("Nodes after prune: %v", err)
	}
	if _, err := s.Proof(ctx, keep.id, keep.leaves[0].RequestID); err != nil {
		t.Fatalf("the tree kept longer: %v", err)
	}
	if p, err := s.Prune(ctx, expire); err != nil || p != (store.Pruned{}) {
		t.Fatalf("prune again: %+v, %v", p, err)
	}
}

// testCommitAfterPrune: a commit prepared from a tree read before its
// leaves were pruned (ingest reads, verifies, then commits) is refused
// with ErrPruned and changes nothing. It used to be stored: its leaves and
// nodes went into a tree marked pruned, which no prune visits again, so
// they were kept for ever, and the tree took a head after its leaves were
// gone.
func testCommitAfterPrune(t *testing.T, s store.Store) {
	ctx := context.Background()
	day := "2026-03-01"
	tr := newTree("acme", "app_one", day)
	c := tr.grow(2)
	c.LeafRetentionDays = 30
	if err := s.Commit(ctx, c); err != nil {
		t.Fatal(err)
	}
	tr.heads++
	read, err := s.Tree(ctx, tr.id)
	if err != nil {
		t.Fatal(err)
	}
	next := tr.grow(3) // from the tree as read
	next.PrevHeads, next.LeafRetentionDays = read.Heads, 60
	rc, counts := s.(RowCounter)
	if counts {
		if n, err := rc.StoredRows(ctx, tr.id); err != nil || n == 0 {
			t.Fatalf("StoredRows of a tree with leaves: %d, %v", n, err)
		}
	}
	expire, _ := store.LeavesExpire(day, 30)
	if p, err := s.Prune(ctx, expire); err != nil || p != (store.Pruned{LeafTrees: 1}) {
		t.Fatalf("prune at expiry: %+v, %v", p, err)
	}
	if err := s.Commit(ctx, next); !errors.Is(err, store.ErrPruned) {
		t.Fatalf("commit to a tree pruned since it was read: %v, want ErrPruned", err)
	}
	got, err := s.Tree(ctx, tr.id)
	if want := (store.Tree{Head: c.Head, Heads: 1, LeafRetentionDays: 30, LeavesPruned: true}); err != nil || got != want {
		t.Fatalf("tree after the refused commit: %+v, %v; want %+v", got, err, want)
	}
	if counts {
		if n, err := rc.StoredRows(ctx, tr.id); err != nil || n != 0 {
			t.Fatalf("the pruned tree holds %d leaf rows (%v), want none", n, err)
		}
	}
	later, _ := store.LeavesExpire(day, 60)
	if p, err := s.Prune(ctx, later); err != nil || p != (store.Pruned{}) {
		t.Fatalf("prune at the refused commit's expiry: %+v, %v", p, err)
	}
}

func testPruneHeads(t *testing.T, s store.Store) {
	ctx := context.Background()
	old := newTree("acme", "app_one", "2016-02-29")
	old.commit(t, s, 2)
	later := newTree("acme", "app_one", "2016-03-01")
	later.commit(t, s, 1)
	expire, _ := store.HeadsExpire(old.id.Day)
	if want := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC); !expire.Equal(want) {
		t.Fatalf("the heads of 2016-02-29 expire at %s, want %s (10 years after the day ended)", expire, want)
	}
	// A second before: the leaves are long gone, every head is kept.
	p, err := s.Prune(ctx, expire.Add(-time.Second))
	if err != nil || p != (store.Pruned{LeafTrees: 2}) {
		t.Fatalf("prune a second before head expiry: %+v, %v", p, err)
	}
	if got, err := s.Tree(ctx, old.id); err != nil || !got.LeavesPruned || got.Heads != 1 {
		t.Fatalf("tree a second before head expiry: %+v, %v", got, err)
	}
	if heads, err := s.Heads(ctx, old.id); err != nil || len(heads) != 1 {
		t.Fatalf("heads a second before expiry: %v, %v", heads, err)
	}
	if got, err := s.LatestHeads(ctx, "acme", old.id.Day, "", 0); err != nil || len(got) != 1 {
		t.Fatalf("LatestHeads a second before expiry: %v, %v", got, err)
	}
	p, err = s.Prune(ctx, expire)
	if err != nil || p != (store.Pruned{Trees: 1}) {
		t.Fatalf("prune at expiry: %+v, %v", p, err)
	}
	if _, err := s.Tree(ctx, old.id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("tree past head retention: %v", err)
	}
	if heads, err := s.Heads(ctx, old.id); err != nil || len(heads) != 0 {
		t.Fatalf("its heads: %v, %v", heads, err)
	}
	if got, err := s.LatestHeads(ctx, "acme", old.id.Day, "", 0); err != nil || len(got) != 0 {
		t.Fatalf("LatestHeads of the pruned day: %v, %v", got, err)
	}
	if _, err := s.Tree(ctx, later.id); err != nil {
		t.Fatalf("the next day's tree: %v", err)
	}
	// A pruned tree can start again (an appliance whose clock is wrong).
	old.heads = 0
	old.leaves = nil
	old.commit(t, s, 1)
}

// testPing: an open store answers Ping, before and after a commit.
func testPing(t *testing.T, s store.Store) {
	ctx := context.Background()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping of an empty store: %v", err)
	}
	newTree("acme", "app_one", today()).commit(t, s, 3)
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping after a commit: %v", err)
	}
}

func testNotFound(t *testing.T, s store.Store) {
	ctx := context.Background()
	id := store.TreeID{TenantID: "acme", ApplianceID: "app_one", Day: today()}
	if _, err := s.Tree(ctx, id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Tree: %v", err)
	}
	if _, err := s.Proof(ctx, id, "req_x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Proof of an unknown tree: %v", err)
	}
	tr := newTree("acme", "app_one", today())
	tr.commit(t, s, 2)
	if _, err := s.Proof(ctx, id, "req_x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Proof of an unknown request: %v", err)
	}
	if p, err := s.Proof(ctx, id, tr.leaves[1].RequestID); err != nil || !bytes.Equal(p.Leaf.LeafHash, tr.leaves[1].LeafHash) {
		t.Fatalf("Proof: %v", err)
	}
}

// BenchmarkProofs measures Proof on s, parallel, over a tree of n leaves
// committed in heads of 10,000 leaves: the store's part of serving a proof.
func BenchmarkProofs(b *testing.B, s store.Store, n int) {
	tr := newTree("acme", "app_bench", today())
	for done := 0; done < n; {
		step := min(10_000, n-done)
		c := tr.grow(step)
		if err := s.Commit(context.Background(), c); err != nil {
			b.Fatal(err)
		}
		tr.heads++
		done += step
	}
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		rng := mathrand.New(mathrand.NewPCG(mathrand.Uint64(), 3))
		for pb.Next() {
			if _, err := s.Proof(context.Background(), tr.id, tr.leaves[rng.IntN(len(tr.leaves))].RequestID); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "proofs/s")
}
