package ingest_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/ingest"
	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/central/store/boltstore"
	"github.com/tollgate-dev/tollgate/central/store/pgstore"
	"github.com/tollgate-dev/tollgate/internal/pgtest"
)

// forkStores open the stores the fork tests run on: bbolt, and
// PostgreSQL (TOLLGATE_TEST_POSTGRES, or 127.0.0.1:5432) in a schema of
// its own, skipped when unreachable except under CI=true.
var forkStores = []struct {
	name string
	open func(t *testing.T) store.Store
}{
	{"bolt", func(t *testing.T) store.Store {
		st, err := boltstore.Open(filepath.Join(t.TempDir(), "central.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}},
	{"postgres", openPostgres},
}

func openPostgres(t *testing.T) store.Store {
	t.Helper()
	st, err := pgstore.Open(context.Background(), pgtest.DSN(), pgstore.Options{Schema: pgtest.Schema(t, "ingest_test"), MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// forkLine is the error the ingester logs for an inconsistent head.
type forkLine struct {
	Level, Msg, Reason     string
	ApplianceID            string `json:"appliance_id"`
	TenantID               string `json:"tenant_id"`
	Day                    string
	EventCount             uint64 `json:"event_count"`
	MerkleRoot             string `json:"merkle_root"`
	StoredEventCount       uint64 `json:"stored_event_count"`
	StoredRoot             string `json:"stored_root"`
	StoredRootFromNodes    bool   `json:"stored_root_from_nodes"`
	SignedHead, StoredHead string `json:"-"`
	RawSignedHead          string `json:"signed_head"`
	RawStoredHead          string `json:"stored_head"`
	Evidence               string
	Err                    string
}

// TestForkedSmallerHead: a correctly signed head no larger than the
// stored tree whose root is not the stored tree's root at its size is
// refused as inconsistent and logged as an error with both heads, whether
// a head of its size is stored or its root is rebuilt from the stored
// nodes; one that agrees is stale, as before. Such heads used to be
// refused as stale before their root was looked at, and the forwarder
// drops a stale head as superseded: the evidence that the appliance
// signed two views of its tree was lost.
func TestForkedSmallerHead(t *testing.T) {
	for _, s := range forkStores {
		t.Run(s.name, func(t *testing.T) {
			f := setupOn(t, s.open(t), nil)
			f.tree.Add(4)
			if _, err := f.publish(t, f.tree.Upload(t, 0)); err != nil {
				t.Fatal(err)
			}
			f.tree.Add(5)
			if _, err := f.publish(t, f.tree.Upload(t, 4)); err != nil {
				t.Fatal(err)
			}
			id := store.TreeOf(f.tree.Head(t, time.Now()))
			stored, err := f.st.Heads(context.Background(), id)
			if err != nil || len(stored) != 2 || stored[0].EventCount != 4 || stored[1].EventCount != 9 {
				t.Fatalf("stored heads: %d, %v; want sizes 4 and 9", len(stored), err)
			}
			// fork is another tree of the same appliance, tenant and day.
			fork := centraltest.NewTree("acme", f.tree.App)
			fork.Add(9)
			signedBefore := func(size int) func() head.Head {
				return func() head.Head {
					at, _ := stored[1].SignedTime()
					return fork.HeadAt(t, size, at.Add(-time.Second))
				}
			}
			now := func(tr *centraltest.Tree, size int) func() head.Head {
				return func() head.Head { return tr.HeadAt(t, size, time.Now()) }
			}
			// A second later than any stored head: signed with an
			// Ed25519 key at a stored head's second, a head of its size
			// and root would be that head again, a duplicate.
			later := func(tr *centraltest.Tree, size int) func() head.Head {
				return func() head.Head { return tr.HeadAt(t, size, time.Now().Add(time.Second)) }
			}
			for _, c := range []struct {
				name       string
				head       func() head.Head
				reason     string
				class      ingest.Class
				fromNodes  bool
				storedHead head.Head // the stored head the log names
			}{
				{"another root at a stored head's size", now(fork, 4), ingest.ReasonInconsistent, ingest.Invalid, false, stored[0]},
				{"another root between stored heads", now(fork, 6), ingest.ReasonInconsistent, ingest.Invalid, true, stored[1]},
				{"another root below the first head", now(fork, 1), ingest.ReasonInconsistent, ingest.Invalid, true, stored[1]},
				{"another root at the stored size, signed before it", signedBefore(9), ingest.ReasonInconsistent, ingest.Invalid, false, stored[1]},
				{"the stored root between stored heads", now(f.tree, 6), ingest.ReasonStaleHead, ingest.Precondition, false, head.Head{}},
				{"the stored root at a stored head's size", later(f.tree, 4), ingest.ReasonStaleHead, ingest.Precondition, false, head.Head{}},
			} {
				t.Run(c.name, func(t *testing.T) {
					before := f.snapshot(t)
					h := c.head()
					f.logs.Reset()
					_, err := f.publish(t, ingest.Upload{Head: h, FirstLeafIndex: h.EventCount, LeafRetentionDays: 90})
					r, ok := ingest.AsRefusal(err)
					if !ok || r.Reason != c.reason || r.Class != c.class || r.StoredEventCount != 9 {
						t.Fatalf("got %v, want a refusal %s with the stored size 9", err, c.reason)
					}
					if !reflect.DeepEqual(before, f.snapshot(t)) {
						t.Fatal("a refused head changed the store")
					}
					var line forkLine
					if err := json.Unmarshal(f.logs.Bytes(), &line); err != nil {
						t.Fatalf("log: %s: %v", f.logs.Bytes(), err)
					}
					if c.reason != ingest.ReasonInconsistent {
						if line.Level != "WARN" {
							t.Fatalf("log of a stale head: %s", f.logs.Bytes())
						}
						return
					}
					want := forkLine{
						Level: "ERROR", Msg: "central: head refused, inconsistent with the stored tree", Reason: c.reason,
						ApplianceID: h.ApplianceID, TenantID: h.TenantID, Day: h.Day, EventCount: h.EventCount,
						MerkleRoot: h.MerkleRoot, StoredEventCount: 9, StoredRoot: f.tree.HeadAt(t, int(h.EventCount), time.Now()).MerkleRoot,
						StoredRootFromNodes: c.fromNodes, Evidence: ingest.EvidenceRecorded, Err: line.Err,
					}
					var signed, storedHead head.Head
					if json.Unmarshal([]byte(line.RawSignedHead), &signed) != nil || signed != h {
						t.Fatalf("the log's signed head %s, want the refused one", line.RawSignedHead)
					}
					if json.Unmarshal([]byte(line.RawStoredHead), &storedHead) != nil || storedHead != c.storedHead {
						t.Fatalf("the log's stored head %s, want the stored head of %d events", line.RawStoredHead, c.storedHead.EventCount)
					}
					line.RawSignedHead, line.RawStoredHead = "", ""
					if line != want || line.Err == "" || line.StoredRoot == line.MerkleRoot {
						t.Fatalf("log of the fork:\n got %+v\nwant %+v", line, want)
					}
					// The evidence is in the store: the latest fork of
					// the tenant, once, whatever the resends.
					checkLatestFork(t, f.st, store.Fork{Head: h, Stored: c.storedHead, StoredRoot: want.StoredRoot, FromNodes: c.fromNodes})
					n := len(forksOf(t, f.st))
					_, err = f.publish(t, ingest.Upload{Head: h, FirstLeafIndex: h.EventCount, LeafRetentionDays: 90})
					if r, ok := ingest.AsRefusal(err); !ok || r.Reason != ingest.ReasonInconsistent || r.Evidence != ingest.EvidenceDuplicate {
						t.Fatalf("the fork sent again: %v, want inconsistent with its evidence a duplicate", err)
					}
					if got := len(forksOf(t, f.st)); got != n {
						t.Fatalf("the fork sent again: %d forks stored, want %d", got, n)
					}
				})
			}
		})
	}
}

// TestForkAfterFinalHead: a tree with a final head is still checked for
// a smaller head that disagrees with it.
func TestForkAfterFinalHead(t *testing.T) {
	f := setup(t)
	f.tree.Day = time.Now().UTC().AddDate(0, 0, -1).Format("2006-01-02")
	f.tree.Add(5)
	if _, err := f.publish(t, f.tree.Upload(t, 0)); err != nil {
		t.Fatal(err)
	}
	fork := centraltest.NewTree("acme", f.tree.App)
	fork.Day = f.tree.Day
	fork.Add(3)
	h := fork.Head(t, time.Now())
	_, err := f.publish(t, ingest.Upload{Head: h, FirstLeafIndex: 3, LeafRetentionDays: 90})
	if r, ok := ingest.AsRefusal(err); !ok || r.Reason != ingest.ReasonInconsistent {
		t.Fatalf("a forked head after the final one: %v, want inconsistent", err)
	}
	_, err = f.publish(t, ingest.Upload{Head: f.tree.HeadAt(t, 3, time.Now()), FirstLeafIndex: 3, LeafRetentionDays: 90})
	if r, ok := ingest.AsRefusal(err); !ok || r.Reason != ingest.ReasonTreeFinal {
		t.Fatalf("a consistent head after the final one: %v, want tree_final", err)
	}
}
