package storetest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/bits"
	"reflect"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/store"
)

// forkOf returns the evidence of a fork of tr: a head of size leaves with
// another root than the stored one, told apart from others by sig.
func forkOf(tr *tree, stored head.Head, size int, sig string) store.Fork {
	h := stored
	h.TenantID, h.ApplianceID, h.Day = tr.id.TenantID, tr.id.ApplianceID, tr.id.Day
	h.EventCount, h.LastSequence = uint64(size), uint64(size)*3
	h.MerkleRoot = fmt.Sprintf("%064x", size*1000+len(sig))
	h.Signature = "fork-" + sig
	f := store.Fork{
		Head: h, Stored: stored, StoredRoot: stored.MerkleRoot, FromNodes: size != int(stored.EventCount),
		ReceivedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(size) * time.Second),
	}
	if f.FromNodes {
		// A store verifies nothing: hashes of its own, as many as size's
		// low bits.
		for i := range bits.OnesCount(uint(size)) {
			hash := sha256.Sum256([]byte(fmt.Sprint(sig, i)))
			f.ConsistencyProof = append(f.ConsistencyProof, hash[:])
		}
	}
	return f
}

// recordFork records f, which must be new, and returns it numbered.
func recordFork(t *testing.T, s store.Store, f store.Fork, maxPerTree int) store.Fork {
	t.Helper()
	ok, err := s.RecordFork(context.Background(), f, maxPerTree)
	if err != nil || !ok {
		t.Fatalf("RecordFork of %s (%s) = %v, %v; want recorded", f.Tree(), f.Head.Signature, ok, err)
	}
	return f
}

// forks lists a tenant's forks, failing the test on an error.
func forks(t *testing.T, s store.Store, tenant string, q store.ForkQuery) []store.Fork {
	t.Helper()
	got, err := s.Forks(context.Background(), tenant, q)
	if err != nil {
		t.Fatalf("Forks(%s, %+v): %v", tenant, q, err)
	}
	if got == nil {
		t.Fatalf("Forks(%s, %+v) = nil, want empty", tenant, q)
	}
	return got
}

// testForkRecord: a fork reads back as recorded, every member, numbered
// 0, 1, ... per tenant in the order recorded; a tree without heads takes
// none.
func testForkRecord(t *testing.T, s store.Store) {
	ctx := context.Background()
	tr := newTree("acme", "app_one", today())
	c := tr.commit(t, s, 5)
	if got := forks(t, s, "acme", store.ForkQuery{}); len(got) != 0 {
		t.Fatalf("forks before any: %v", got)
	}
	a := recordFork(t, s, forkOf(tr, c.Head, 5, "a"), 0)
	b := recordFork(t, s, forkOf(tr, c.Head, 2, "b"), 0)
	other := newTree("beta", "app_one", today())
	oc := other.commit(t, s, 1)
	z := recordFork(t, s, forkOf(other, oc.Head, 1, "z"), 0)
	a.Number, b.Number, z.Number = 0, 1, 0
	if got := forks(t, s, "acme", store.ForkQuery{}); !reflect.DeepEqual(got, []store.Fork{a, b}) {
		t.Fatalf("Forks of acme:\n got %+v\nwant %+v", got, []store.Fork{a, b})
	}
	if got := forks(t, s, "beta", store.ForkQuery{}); !reflect.DeepEqual(got, []store.Fork{z}) {
		t.Fatalf("Forks of beta:\n got %+v\nwant %+v", got, []store.Fork{z})
	}
	if got := forks(t, s, "acm", store.ForkQuery{}); len(got) != 0 {
		t.Fatalf("Forks of a tenant whose id prefixes another's: %v", got)
	}
	none := newTree("acme", "app_none", today())
	if _, err := s.RecordFork(ctx, forkOf(none, c.Head, 1, "n"), 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a fork of a tree without heads: %v, want ErrNotFound", err)
	}
}

// testForkOnce: the same refused head recorded again adds nothing, and
// keeps its number; another head of the same tree is another fork, and
// the same head in another tree (another day) too.
func testForkOnce(t *testing.T, s store.Store) {
	ctx := context.Background()
	tr := newTree("acme", "app_one", today())
	c := tr.commit(t, s, 5)
	f := recordFork(t, s, forkOf(tr, c.Head, 3, "a"), 0)
	again := f
	again.ReceivedAt = f.ReceivedAt.Add(time.Hour) // received later: the same evidence
	if ok, err := s.RecordFork(ctx, again, 0); err != nil || ok {
		t.Fatalf("the same refused head again: %v, %v; want not recorded, no error", ok, err)
	}
	if ok, err := s.RecordFork(ctx, again, 1); err != nil || ok {
		t.Fatalf("the same refused head again, at the bound: %v, %v; want not recorded, no error", ok, err)
	}
	g := recordFork(t, s, forkOf(tr, c.Head, 3, "b"), 0)
	g.Number = 1
	f.Number = 0
	if got := forks(t, s, "acme", store.ForkQuery{}); !reflect.DeepEqual(got, []store.Fork{f, g}) {
		t.Fatalf("Forks:\n got %+v\nwant %+v", got, []store.Fork{f, g})
	}
}

// testForkBound: a tree keeps at most maxPerTree forks: one more fails
// with ErrForkLimit and changes nothing, while another tree of the tenant
// still takes its own.
func testForkBound(t *testing.T, s store.Store) {
	ctx := context.Background()
	tr := newTree("acme", "app_one", today())
	c := tr.commit(t, s, 5)
	const most = 3
	for i := range most {
		recordFork(t, s, forkOf(tr, c.Head, i+1, "a"), most)
	}
	if ok, err := s.RecordFork(ctx, forkOf(tr, c.Head, 4, "a"), most); !errors.Is(err, store.ErrForkLimit) || ok {
		t.Fatalf("a fork past the bound: %v, %v; want ErrForkLimit", ok, err)
	}
	if got := forks(t, s, "acme", store.ForkQuery{}); len(got) != most {
		t.Fatalf("%d forks kept, want %d", len(got), most)
	}
	other := newTree("acme", "app_two", today())
	oc := other.commit(t, s, 2)
	f := recordFork(t, s, forkOf(other, oc.Head, 1, "a"), most)
	if got := forks(t, s, "acme", store.ForkQuery{From: most}); len(got) != 1 || got[0].Head != f.Head || got[0].Number != most {
		t.Fatalf("the other tree's fork: %+v, want number %d", got, most)
	}
	// Without a bound, the tree takes more.
	recordFork(t, s, forkOf(tr, c.Head, 4, "a"), 0)
}

// testForkFilters: a list by appliance, by day or both holds the tenant's
// forks of those only, by number.
func testForkFilters(t *testing.T, s store.Store) {
	day, old := today(), "2026-03-01"
	var all []store.Fork
	for i, id := range []store.TreeID{
		{TenantID: "acme", ApplianceID: "app_one", Day: day},
		{TenantID: "acme", ApplianceID: "app_two", Day: day},
		{TenantID: "acme", ApplianceID: "app_one", Day: old},
		{TenantID: "acme", ApplianceID: "app_on", Day: day},
		{TenantID: "beta", ApplianceID: "app_one", Day: day},
	} {
		tr := newTree(id.TenantID, id.ApplianceID, id.Day)
		c := tr.commit(t, s, 4)
		for j := range 2 {
			f := recordFork(t, s, forkOf(tr, c.Head, j+1, fmt.Sprint(i)), 0)
			if id.TenantID == "acme" {
				f.Number = uint64(len(all))
				all = append(all, f)
			}
		}
	}
	pick := func(idx ...int) []store.Fork {
		out := []store.Fork{}
		for _, i := range idx {
			out = append(out, all[i])
		}
		return out
	}
	for _, c := range []struct {
		q    store.ForkQuery
		want []store.Fork
	}{
		{store.ForkQuery{}, all},
		{store.ForkQuery{ApplianceID: "app_one"}, pick(0, 1, 4, 5)},
		{store.ForkQuery{Day: old}, pick(4, 5)},
		{store.ForkQuery{ApplianceID: "app_one", Day: day}, pick(0, 1)},
		{store.ForkQuery{ApplianceID: "app_one", Day: day, From: 1}, pick(1)},
		{store.ForkQuery{ApplianceID: "app_one", From: 2}, pick(4, 5)},
		{store.ForkQuery{ApplianceID: "app_one", From: 2, Limit: 1}, pick(4)},
		{store.ForkQuery{ApplianceID: "app_three"}, pick()},
		{store.ForkQuery{Day: "2020-01-01"}, pick()},
	} {
		if got := forks(t, s, "acme", c.q); !reflect.DeepEqual(got, c.want) {
			t.Fatalf("Forks(%+v):\n got %+v\nwant %+v", c.q, got, c.want)
		}
	}
}

// testForkPages: paging with from and every limit yields each fork once,
// by number; past the last, an empty page.
func testForkPages(t *testing.T, s store.Store) {
	var want []uint64
	for _, app := range []string{"app_b", "app_a", "app_c"} {
		tr := newTree("acme", app, today())
		c := tr.commit(t, s, 3)
		for i := range 3 {
			recordFork(t, s, forkOf(tr, c.Head, i+1, app), 0)
			want = append(want, uint64(len(want)))
		}
	}
	for limit := 1; limit <= len(want)+1; limit++ {
		var got []uint64
		for from, pages := uint64(0), 0; ; pages++ {
			if pages > len(want) {
				t.Fatalf("pages of %d: more than %d pages (%v so far)", limit, len(want), got)
			}
			page := forks(t, s, "acme", store.ForkQuery{From: from, Limit: limit})
			if len(page) > limit {
				t.Fatalf("a page of %d forks, limit %d", len(page), limit)
			}
			for _, f := range page {
				got = append(got, f.Number)
			}
			if len(page) < limit {
				break
			}
			from = page[len(page)-1].Number + 1
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("pages of %d: %v, want %v", limit, got, want)
		}
	}
	if got := forks(t, s, "acme", store.ForkQuery{From: uint64(len(want)), Limit: 5}); len(got) != 0 {
		t.Fatalf("past the last fork: %v", got)
	}
	if got := forks(t, s, "acme", store.ForkQuery{From: 1 << 63, Limit: 5}); len(got) != 0 {
		t.Fatalf("far past the last fork: %v", got)
	}
}

// testPruneForks: a tree's forks are kept while its heads are, through
// the prune of its leaves, and deleted with its heads; numbers are not
// given again after.
func testPruneForks(t *testing.T, s store.Store) {
	ctx := context.Background()
	old := newTree("acme", "app_one", "2016-02-29")
	c := old.commit(t, s, 3)
	gone := recordFork(t, s, forkOf(old, c.Head, 2, "old"), 0)
	later := newTree("acme", "app_one", "2016-03-01")
	lc := later.commit(t, s, 3)
	kept := recordFork(t, s, forkOf(later, lc.Head, 2, "later"), 0)
	gone.Number, kept.Number = 0, 1
	expire, _ := store.HeadsExpire(old.id.Day)
	if p, err := s.Prune(ctx, expire.Add(-time.Second)); err != nil || p != (store.Pruned{LeafTrees: 2}) {
		t.Fatalf("prune a second before head expiry: %+v, %v", p, err)
	}
	if got := forks(t, s, "acme", store.ForkQuery{}); !reflect.DeepEqual(got, []store.Fork{gone, kept}) {
		t.Fatalf("forks once the leaves are pruned:\n got %+v\nwant both", got)
	}
	if p, err := s.Prune(ctx, expire); err != nil || p != (store.Pruned{Trees: 1}) {
		t.Fatalf("prune at head expiry: %+v, %v", p, err)
	}
	if got := forks(t, s, "acme", store.ForkQuery{}); !reflect.DeepEqual(got, []store.Fork{kept}) {
		t.Fatalf("forks once the old day's heads are pruned:\n got %+v\nwant %+v", got, []store.Fork{kept})
	}
	// The tree starts again (a wrong clock): its fork is a new one, with
	// a new number.
	old.heads, old.leaves = 0, nil
	c = old.commit(t, s, 3)
	again := recordFork(t, s, forkOf(old, c.Head, 2, "old"), 0)
	if got := forks(t, s, "acme", store.ForkQuery{From: 2}); len(got) != 1 || got[0].Head != again.Head || got[0].Number != 2 {
		t.Fatalf("a fork after the prune: %+v, want number 2", got)
	}
}
