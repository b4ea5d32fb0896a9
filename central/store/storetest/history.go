package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/store"
)

// historyTree commits heads of the given growths to a new tree of
// tenant acme on app, and returns the tree and its heads in commit order.
func historyTree(t *testing.T, s store.Store, app string, growths ...int) (*tree, []head.Head) {
	t.Helper()
	tr := newTree("acme", app, today())
	var heads []head.Head
	for _, n := range growths {
		heads = append(heads, tr.commit(t, s, n).Head)
	}
	return tr, heads
}

// testHeadsFrom: HeadsFrom pages through every stored head of a tree, in
// commit order, and reads nothing of another tree.
func testHeadsFrom(t *testing.T, s store.Store) {
	ctx := context.Background()
	tr, want := historyTree(t, s, "app_a", 1, 2, 0, 3, 1, 4, 2)
	// Neighbours whose keys sort next to the tree's.
	historyTree(t, s, "app_a-", 1)
	historyTree(t, s, "app_b", 2, 1)
	newTree("acme", "app_a", "2020-01-01").commit(t, s, 1)
	all, err := s.HeadsFrom(ctx, tr.id, 0, 0)
	if err != nil || !reflect.DeepEqual(all, want) {
		t.Fatalf("HeadsFrom(0, no limit) = %v, %v; want %v", all, err, want)
	}
	for from := 0; from <= len(want)+1; from++ {
		for limit := 0; limit <= len(want)+1; limit++ {
			got, err := s.HeadsFrom(ctx, tr.id, from, limit)
			rest := want[min(from, len(want)):]
			if limit > 0 && limit < len(rest) {
				rest = rest[:limit]
			}
			if err != nil || got == nil || len(got) != len(rest) || (len(rest) > 0 && !reflect.DeepEqual(got, rest)) {
				t.Fatalf("HeadsFrom(%d, %d) = %v, %v; want %v", from, limit, got, err, rest)
			}
		}
	}
	unknown := tr.id
	unknown.ApplianceID = "app_none"
	if got, err := s.HeadsFrom(ctx, unknown, 0, 10); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("HeadsFrom of a tree without heads = %#v, %v; want empty", got, err)
	}
}

// testConsistency: between any two stored sizes, Consistency returns the
// first head of the smaller size, the latest of the larger, and a proof
// that verifies between their roots; a size without a stored head is a
// SizeError that says whether it is beyond the latest head.
func testConsistency(t *testing.T, s store.Store) {
	ctx := context.Background()
	// Sizes 0, 2, 2, 5, 9, 9, 16, 17, 33: an empty first head, and heads
	// of their predecessor's size (as a day's final head is).
	tr, heads := historyTree(t, s, "app_one", 0, 2, 0, 3, 4, 0, 7, 1, 16)
	first, last := map[uint64]head.Head{}, map[uint64]head.Head{}
	for _, h := range heads {
		if _, ok := first[h.EventCount]; !ok {
			first[h.EventCount] = h
		}
		last[h.EventCount] = h
	}
	latest := heads[len(heads)-1]
	for from, fh := range first {
		for to, th := range last {
			if from > to {
				continue
			}
			c, err := s.Consistency(ctx, tr.id, from, to)
			if err != nil {
				t.Fatalf("Consistency(%d, %d): %v", from, to, err)
			}
			if c.From != fh || c.To != th {
				t.Fatalf("Consistency(%d, %d): heads %s and %s, want %s and %s", from, to, c.From.Signature, c.To.Signature, fh.Signature, th.Signature)
			}
			r1, _ := fh.Root()
			r2, _ := th.Root()
			if err := proof.VerifyConsistency(rfc6962.DefaultHasher, from, to, c.Hashes, r1, r2); err != nil {
				t.Fatalf("Consistency(%d, %d): the proof of %d hashes does not verify: %v", from, to, len(c.Hashes), err)
			}
		}
		c, err := s.Consistency(ctx, tr.id, from, store.LatestSize)
		if err != nil || c.From != fh || c.To != latest {
			t.Fatalf("Consistency(%d, latest): %s to %s, %v; want %s to %s", from, c.From.Signature, c.To.Signature, err, fh.Signature, latest.Signature)
		}
	}
	for _, c := range []struct {
		from, to uint64
		size     uint64
		beyond   bool
	}{
		{1, 33, 1, false},
		{2, 3, 3, false},
		{10, 16, 10, false},
		{2, 34, 34, true},
		{34, store.LatestSize, 34, true},
		{40, 50, 40, true},
	} {
		_, err := s.Consistency(ctx, tr.id, c.from, c.to)
		var se *store.SizeError
		if !errors.As(err, &se) || se.Size != c.size || se.Latest != 33 || se.Beyond() != c.beyond {
			t.Fatalf("Consistency(%d, %d): %v; want a SizeError of size %d (beyond: %t)", c.from, c.to, err, c.size, c.beyond)
		}
	}
	unknown := tr.id
	unknown.ApplianceID = "app_none"
	if _, err := s.Consistency(ctx, unknown, 0, store.LatestSize); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Consistency of a tree without heads: %v, want ErrNotFound", err)
	}
}

// testConsistencyPruned: once a tree's leaves are pruned, a proof that
// needs its nodes is ErrPruned; one that needs none (from 0, or between
// heads of one size) is still served, from the heads alone.
func testConsistencyPruned(t *testing.T, s store.Store) {
	ctx := context.Background()
	day := "2026-03-01"
	tr := newTree("acme", "app_one", day)
	for _, n := range []int{0, 3, 2, 0} {
		c := tr.grow(n)
		c.LeafRetentionDays = 30
		if err := s.Commit(ctx, c); err != nil {
			t.Fatal(err)
		}
		tr.heads++
	}
	expire, _ := store.LeavesExpire(day, 30)
	if p, err := s.Prune(ctx, expire); err != nil || p != (store.Pruned{LeafTrees: 1}) {
		t.Fatalf("prune at expiry: %+v, %v", p, err)
	}
	if _, err := s.Consistency(ctx, tr.id, 3, 5); !errors.Is(err, store.ErrPruned) {
		t.Fatalf("Consistency(3, 5) after the prune: %v, want ErrPruned", err)
	}
	for _, sizes := range [][2]uint64{{0, 5}, {5, 5}, {3, 3}, {0, 0}} {
		c, err := s.Consistency(ctx, tr.id, sizes[0], sizes[1])
		if err != nil || len(c.Hashes) != 0 || c.From.EventCount != sizes[0] || c.To.EventCount != sizes[1] {
			t.Fatalf("Consistency(%d, %d) after the prune: %+v, %v", sizes[0], sizes[1], c, err)
		}
	}
}

// BenchmarkHeadStorage measures what a stored head costs a store: it
// commits a day of heads signed every minute (1,440, and the day's final
// head) to each of 4 trees, heads as appliances sign them (a real
// certificate and signature), with no leaves, and reports the growth of
// used, the store's bytes in use, per head. Run it once (-benchtime 1x).
func BenchmarkHeadStorage(b *testing.B, s store.Store, used func() (int64, error)) {
	ca, err := fleet.NewCA("bench fleet CA", time.Now().AddDate(0, 0, -2))
	if err != nil {
		b.Fatal(err)
	}
	certPEM, keyPEM, err := fleet.IssueAppliance(ca, "app_bench0123456789abcdef")
	if err != nil {
		b.Fatal(err)
	}
	app, err := fleet.ParseAppliance(certPEM, keyPEM)
	if err != nil {
		b.Fatal(err)
	}
	const trees, perTree = 4, 1441
	ctx := context.Background()
	before, err := used()
	if err != nil {
		b.Fatal(err)
	}
	var last head.Head
	b.ResetTimer()
	for range b.N {
		for i := range trees {
			tr := newTree(fmt.Sprintf("tenant-%d-%d", i, mathrand.Uint32()), app.ID, today())
			for n := range perTree {
				root := make([]byte, 32)
				_, _ = rand.Read(root)
				h, err := head.Sign(head.Head{TenantID: tr.id.TenantID, Day: tr.id.Day, EventCount: uint64(n+1) * 50,
					LastSequence: uint64(n+1) * 200, MerkleRoot: hex.EncodeToString(root)}, app, time.Now())
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Commit(ctx, store.Commit{Head: h, PrevHeads: n, LeafRetentionDays: 90}); err != nil {
					b.Fatal(err)
				}
				last = h
			}
		}
	}
	b.StopTimer()
	after, err := used()
	if err != nil {
		b.Fatal(err)
	}
	doc, _ := json.Marshal(last)
	b.ReportMetric(float64(after-before)/float64(b.N*trees*perTree), "bytes/head")
	b.ReportMetric(float64(len(doc)), "json-bytes/head")
}

// BenchmarkConsistency measures Consistency on s, parallel, between
// random pairs of the 300 heads of a tree of 99,000 leaves (330 leaves
// each): the store's part of serving a consistency proof, bisections
// included.
func BenchmarkConsistency(b *testing.B, s store.Store) {
	tr := newTree("acme", "app_bench", today())
	const heads, each = 300, 330
	for range heads {
		if err := s.Commit(context.Background(), tr.grow(each)); err != nil {
			b.Fatal(err)
		}
		tr.heads++
	}
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		rng := mathrand.New(mathrand.NewPCG(mathrand.Uint64(), 5))
		for pb.Next() {
			x, y := uint64(rng.IntN(heads)+1)*each, uint64(rng.IntN(heads)+1)*each
			if _, err := s.Consistency(context.Background(), tr.id, min(x, y), max(x, y)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "proofs/s")
}

// BenchmarkLeafStorage measures what a stored leaf costs a store, with
// its request index and the Merkle nodes it completes: it commits a tree
// of 100,000 leaves in heads of 1,000 (as a busy appliance forwards them)
// twice, once with the leaves' hashes alone and once with their canonical
// bytes (canonicalLeaf: some 600 bytes), and reports the growth of used,
// the store's bytes in use, per leaf for each. Run it once (-benchtime
// 1x).
func BenchmarkLeafStorage(b *testing.B, s store.Store, used func() (int64, error)) {
	const leaves, perHead = 100_000, 1_000
	ctx := context.Background()
	measure := func(withBytes bool) (perLeaf, leafBytes float64) {
		before, err := used()
		if err != nil {
			b.Fatal(err)
		}
		var canon int
		for range b.N {
			tr := newTree(fmt.Sprintf("tenant-%d", mathrand.Uint32()), "app_bench0123456789abcdef", today())
			for range leaves / perHead {
				c := tr.grow(perHead)
				for i := range c.Leaves {
					if withBytes {
						c.Leaves[i].Leaf = canonicalLeaf(tr.id, c.Leaves[i].RequestID, c.Leaves[i].Sequence)
					} else {
						c.Leaves[i].Leaf = nil
					}
					canon += len(c.Leaves[i].Leaf)
				}
				if err := s.Commit(ctx, c); err != nil {
					b.Fatal(err)
				}
				tr.heads++
			}
		}
		after, err := used()
		if err != nil {
			b.Fatal(err)
		}
		n := float64(b.N * leaves)
		return float64(after-before) / n, float64(canon) / n
	}
	b.ResetTimer()
	hashOnly, _ := measure(false)
	withLeaf, canon := measure(true)
	b.StopTimer()
	b.ReportMetric(hashOnly, "bytes/leaf-hash-only")
	b.ReportMetric(withLeaf, "bytes/leaf")
	b.ReportMetric(canon, "canonical-bytes/leaf")
}
