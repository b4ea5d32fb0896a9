package ingest_test

import (
	"context"
	"math/bits"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/compact"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/ingest"
	"github.com/tollgate-dev/tollgate/central/store"
)

// countingStore counts the calls of each store method the ingester makes.
type countingStore struct {
	store.Store
	mu    sync.Mutex
	calls map[string]int
}

func counting(s store.Store) *countingStore {
	return &countingStore{Store: s, calls: map[string]int{}}
}

func (c *countingStore) count(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[name]++
}

// take returns the counts since the last take, and starts again.
func (c *countingStore) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = map[string]int{}
	return out
}

func (c *countingStore) Tree(ctx context.Context, id store.TreeID) (store.Tree, error) {
	c.count("Tree")
	return c.Store.Tree(ctx, id)
}

func (c *countingStore) Heads(ctx context.Context, id store.TreeID) ([]head.Head, error) {
	c.count("Heads")
	return c.Store.Heads(ctx, id)
}

func (c *countingStore) HeadAt(ctx context.Context, id store.TreeID, n int) (head.Head, error) {
	c.count("HeadAt")
	return c.Store.HeadAt(ctx, id, n)
}

func (c *countingStore) Nodes(ctx context.Context, id store.TreeID, ids []compact.NodeID) ([][]byte, error) {
	c.count("Nodes")
	return c.Store.Nodes(ctx, id, ids)
}

func (c *countingStore) Leaves(ctx context.Context, id store.TreeID, from, to uint64) ([]store.Leaf, error) {
	c.count("Leaves")
	return c.Store.Leaves(ctx, id, from, to)
}

func (c *countingStore) Commit(ctx context.Context, cm store.Commit) error {
	c.count("Commit")
	return c.Store.Commit(ctx, cm)
}

// TestSameSizeHeads: a head of the stored size is stored only when it is
// the day's final head, once. Signed again (a later signed_at; at the same
// second, the same bytes with an Ed25519 key, a new signature with an
// ECDSA one) it is accepted as a duplicate and not stored; signed before
// the stored one, it is stale (the latest head's signed_at does not go
// back); after the final head, another final head is refused (tree_final)
// while the head before it is still a duplicate. It runs with an appliance
// of each key kind.
func TestSameSizeHeads(t *testing.T) {
	for _, kind := range []fleet.KeyKind{fleet.Ed25519, fleet.ECDSAP256} {
		t.Run(string(kind), func(t *testing.T) { testSameSizeHeads(t, kind) })
	}
}

func testSameSizeHeads(t *testing.T, kind fleet.KeyKind) {
	f := setup(t)
	f.withKeyKind(t, kind)
	yesterday := time.Now().UTC().AddDate(0, 0, -1)
	f.tree.Day = yesterday.Format("2006-01-02")
	noon := time.Date(yesterday.Year(), yesterday.Month(), yesterday.Day(), 12, 0, 0, 0, time.UTC)
	f.tree.Add(2)
	at := func(when time.Time) func() ingest.Upload {
		return func() ingest.Upload {
			return ingest.Upload{Head: f.tree.Head(t, when), FirstLeafIndex: 2, LeafRetentionDays: 90}
		}
	}
	first := ingest.Upload{Head: f.tree.Head(t, noon), Leaves: f.tree.Leaves, LeafRetentionDays: 90}
	final := at(time.Now())()
	id := store.TreeOf(first.Head)
	for _, step := range []struct {
		name   string
		upload func() ingest.Upload
		reason string // "": accepted
		dup    bool
		heads  int        // stored after the step
		latest *head.Head // stored latest after the step
	}{
		{"first head", func() ingest.Upload { return first }, "", false, 1, &first.Head},
		{"signed again later", at(noon.Add(time.Minute)), "", true, 1, &first.Head},
		{"signed again at the same second", at(noon), "", true, 1, &first.Head},
		{"its leaves sent again", func() ingest.Upload {
			u := at(noon.Add(time.Hour))()
			u.FirstLeafIndex, u.Leaves = 0, f.tree.Leaves
			return u
		}, "", true, 1, &first.Head},
		{"signed before the stored head", at(noon.Add(-time.Minute)), ingest.ReasonStaleHead, false, 1, &first.Head},
		{"the first head again", func() ingest.Upload { return first }, "", true, 1, &first.Head},
		{"the final head", func() ingest.Upload { return final }, "", false, 2, &final.Head},
		{"the final head again", func() ingest.Upload { return final }, "", true, 2, &final.Head},
		// A minute later: an Ed25519 head signed at the final one's
		// second would be the same bytes.
		{"another final head", at(time.Now().Add(time.Minute)), ingest.ReasonTreeFinal, false, 2, &final.Head},
		{"the head before the final one again", func() ingest.Upload { return first }, "", true, 2, &final.Head},
		{"that head signed again", at(noon.Add(2 * time.Hour)), ingest.ReasonTreeFinal, false, 2, &final.Head},
	} {
		res, err := f.publish(t, step.upload())
		if r, refused := ingest.AsRefusal(err); step.reason != "" {
			if !refused || r.Reason != step.reason {
				t.Fatalf("%s: %+v, %v; want a refusal %s", step.name, res, err, step.reason)
			}
		} else if err != nil || res.Duplicate != step.dup || res.EventCount != 2 {
			t.Fatalf("%s: %+v, %v; want accepted, duplicate %v", step.name, res, err, step.dup)
		}
		tr, err := f.st.Tree(context.Background(), id)
		if err != nil || tr.Heads != step.heads || tr.Head != *step.latest {
			t.Fatalf("%s: the store holds %d heads, the latest signed at %s (%v); want %d, signed at %s",
				step.name, tr.Heads, tr.Head.SignedAt, err, step.heads, step.latest.SignedAt)
		}
	}
}

// TestSameSizeHeadsCostTheSame: a certificate holder that uploads the
// same head signed again and again adds no head to the store, and each
// upload reads the same from it however many came before. Each used to be
// stored, and each read and decoded every head of the tree before, so
// that the n-th upload cost n.
func TestSameSizeHeadsCostTheSame(t *testing.T) {
	var cs *countingStore
	f := setupWith(t, func(s store.Store) store.Store { cs = counting(s); return cs })
	f.tree.Add(3)
	if _, err := f.publish(t, f.tree.Upload(t, 0)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	id := store.TreeOf(f.tree.Head(t, start))
	var want map[string]int
	for i := range 100 {
		cs.take()
		// Each a second later than the last, so that no two are the
		// same bytes (an Ed25519 signature of one body is always the
		// same): within the central plane's allowed clock skew.
		res, err := f.publish(t, ingest.Upload{Head: f.tree.Head(t, start.Add(time.Duration(i+1)*time.Second)),
			FirstLeafIndex: 3, LeafRetentionDays: 90})
		if err != nil || !res.Duplicate {
			t.Fatalf("upload %d of the same head signed again: %+v, %v", i, res, err)
		}
		got := cs.take()
		if got["Heads"] != 0 || got["HeadAt"] != 0 || got["Commit"] != 0 {
			t.Fatalf("upload %d read or wrote heads: %v", i, got)
		}
		if i == 0 {
			want = got
		} else if !reflect.DeepEqual(got, want) {
			t.Fatalf("upload %d read %v from the store, the first %v", i, got, want)
		}
	}
	if tr, err := f.st.Tree(context.Background(), id); err != nil || tr.Heads != 1 {
		t.Fatalf("the store holds %d heads (%v), want the first alone", tr.Heads, err)
	}
}

// TestEarlierHeadFoundBySize: a head sent again after later ones is a
// duplicate, found among the stored heads by bisection on their sizes:
// some log2(heads) are read, not all of them.
func TestEarlierHeadFoundBySize(t *testing.T) {
	var cs *countingStore
	f := setupWith(t, func(s store.Store) store.Store { cs = counting(s); return cs })
	const n = 40
	var uploads []ingest.Upload
	for range n {
		f.tree.AddFast(1 + len(uploads)%3)
		u := f.tree.Upload(t, uint64(len(f.tree.Leaves)-1-len(uploads)%3))
		if _, err := f.publish(t, u); err != nil {
			t.Fatal(err)
		}
		uploads = append(uploads, u)
	}
	bound := bits.Len(n) + 1 // the bisection, and the head it ends at
	for i, u := range uploads {
		cs.take()
		res, err := f.publish(t, u)
		if err != nil || !res.Duplicate || res.EventCount != uint64(len(f.tree.Leaves)) {
			t.Fatalf("head %d sent again: %+v, %v", i, res, err)
		}
		if got := cs.take(); got["Heads"] != 0 || got["HeadAt"] > bound || got["Commit"] != 0 {
			t.Fatalf("head %d of %d sent again read %v; want at most %d heads", i, n, got, bound)
		}
	}
}
