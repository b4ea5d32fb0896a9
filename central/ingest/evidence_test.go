package ingest_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/ingest"
	"github.com/tollgate-dev/tollgate/central/store"
)

// forksOf is every fork of the fixture's tenant, acme.
func forksOf(t *testing.T, st store.Store) []store.Fork {
	t.Helper()
	got, err := st.Forks(context.Background(), "acme", store.ForkQuery{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// checkLatestFork fails unless acme's latest fork is want (its number
// and time of receipt aside, which must be recent, and its consistency
// proof, which must prove its stored root from its stored head when the
// root was rebuilt from the nodes, and be empty when not).
func checkLatestFork(t *testing.T, st store.Store, want store.Fork) {
	t.Helper()
	all := forksOf(t, st)
	if len(all) == 0 {
		t.Fatal("no fork stored")
	}
	got := all[len(all)-1]
	if time.Since(got.ReceivedAt) > time.Minute || got.ReceivedAt.After(time.Now()) {
		t.Fatalf("the fork was received at %s, not just now", got.ReceivedAt)
	}
	hashes := got.ConsistencyProof
	got.Number, got.ReceivedAt, got.ConsistencyProof = 0, time.Time{}, nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the stored fork:\n got %+v\nwant %+v", got, want)
	}
	if !want.FromNodes {
		if len(hashes) != 0 {
			t.Fatalf("a fork of two heads of one size with a consistency proof of %d hashes", len(hashes))
		}
		return
	}
	// The record alone proves the stored root: the stored head (signed)
	// commits to it at the refused head's size.
	r1, err1 := hex.DecodeString(got.StoredRoot)
	r2, err2 := got.Stored.Root()
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, got.Head.EventCount, got.Stored.EventCount, hashes, r1, r2); err != nil {
		t.Fatalf("the fork's consistency proof (%d hashes) from its stored root at %d to its stored head: %v", len(hashes), got.Head.EventCount, err)
	}
	if got.Head.EventCount > 0 && len(hashes) == 0 {
		t.Fatal("a fork rebuilt from the nodes without a consistency proof")
	}
}

// failingForks is a store whose RecordFork fails.
type failingForks struct{ store.Store }

func (failingForks) RecordFork(context.Context, store.Fork, int) (bool, error) {
	return false, errors.New("the disk is on fire")
}

// TestForkEvidenceBounded: past the most forks kept of a tree the
// evidence is not stored, and when the store fails it is lost; either
// way the head is refused as inconsistent all the same, and the log says
// what became of the evidence.
func TestForkEvidenceBounded(t *testing.T) {
	for _, c := range []struct {
		name     string
		wrap     func(store.Store) store.Store
		evidence []string // of forks of 1, 2 and 3 leaves
		logged   string
		stored   int
	}{
		{"bound", nil, []string{ingest.EvidenceRecorded, ingest.EvidenceRecorded, ingest.EvidenceOverLimit},
			"fork evidence not kept, the tree holds the most forks kept of it", 2},
		{"failing store", func(s store.Store) store.Store { return failingForks{s} },
			[]string{ingest.EvidenceFailed, ingest.EvidenceFailed, ingest.EvidenceFailed}, "storing fork evidence failed", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := setupWith(t, c.wrap)
			in, err := ingest.New(ingest.Options{CA: f.fleet.CA.Cert, Store: f.wrapped, MaxForksPerTree: 2, Logger: f.logger})
			if err != nil {
				t.Fatal(err)
			}
			f.tree.Add(5)
			if _, err := f.publish(t, f.tree.Upload(t, 0)); err != nil {
				t.Fatal(err)
			}
			fork := centraltest.NewTree("acme", f.tree.App)
			fork.Add(3)
			for i, want := range c.evidence {
				f.logs.Reset()
				h := fork.HeadAt(t, i+1, time.Now())
				_, err := in.Publish(context.Background(), h.ApplianceID, ingest.Upload{Head: h, FirstLeafIndex: h.EventCount, LeafRetentionDays: 90})
				r, ok := ingest.AsRefusal(err)
				if !ok || r.Reason != ingest.ReasonInconsistent || r.Evidence != want {
					t.Fatalf("fork %d: %v, want inconsistent with its evidence %s", i+1, err, want)
				}
				if !strings.Contains(f.logs.String(), `"evidence":"`+want+`"`) {
					t.Fatalf("fork %d: the log does not say the evidence is %s:\n%s", i+1, want, f.logs.String())
				}
			}
			if !strings.Contains(f.logs.String(), c.logged) {
				t.Fatalf("the last fork's log lacks %q:\n%s", c.logged, f.logs.String())
			}
			if got := len(forksOf(t, f.st)); got != c.stored {
				t.Fatalf("%d forks stored, want %d", got, c.stored)
			}
		})
	}
}

// timingOutForks is a store whose RecordFork takes longer than it is
// given: it answers as a write cut off at its deadline would, at once,
// and sends how long it was given (negative: no deadline).
type timingOutForks struct {
	store.Store
	given chan time.Duration
}

func (s timingOutForks) RecordFork(ctx context.Context, _ store.Fork, _ int) (bool, error) {
	given := time.Duration(-1)
	if deadline, ok := ctx.Deadline(); ok {
		given = time.Until(deadline)
	}
	s.given <- given
	return false, fmt.Errorf("record fork: %w", context.DeadlineExceeded)
}

// TestForkEvidenceTimeout: the store write of a fork's evidence is given
// at most 5 s, whatever the upload's context (the upload holds its slot
// meanwhile), and when it times out the head is refused as inconsistent
// all the same, its evidence failed and logged. The bound was 30 s.
func TestForkEvidenceTimeout(t *testing.T) {
	given := make(chan time.Duration, 1)
	f := setupWith(t, func(s store.Store) store.Store { return timingOutForks{s, given} })
	f.tree.Add(5)
	if _, err := f.publish(t, f.tree.Upload(t, 0)); err != nil {
		t.Fatal(err)
	}
	fork := centraltest.NewTree("acme", f.tree.App)
	fork.Add(3)
	h := fork.HeadAt(t, 3, time.Now())
	f.logs.Reset()
	// The upload's own context has no deadline: the bound is the write's.
	_, err := f.in.Publish(context.Background(), h.ApplianceID, ingest.Upload{Head: h, FirstLeafIndex: h.EventCount, LeafRetentionDays: 90})
	r, ok := ingest.AsRefusal(err)
	if !ok || r.Reason != ingest.ReasonInconsistent || r.Evidence != ingest.EvidenceFailed {
		t.Fatalf("a fork whose evidence times out: %v, want inconsistent with its evidence %s", err, ingest.EvidenceFailed)
	}
	if d := <-given; d <= 0 || d > 5*time.Second {
		t.Fatalf("the evidence's store write was given %s, want a deadline at most 5s away", d)
	}
	if !strings.Contains(f.logs.String(), "storing fork evidence failed") || !strings.Contains(f.logs.String(), "deadline exceeded") {
		t.Fatalf("the log does not say the evidence timed out:\n%s", f.logs.String())
	}
}
