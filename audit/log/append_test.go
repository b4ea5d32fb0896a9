package log

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/audit/leaf"
)

func TestAppendAndRead(t *testing.T) {
	e := newEnv(t, Options{})
	tenants := []string{"acme", "globex", "acme", "acme", "globex"}
	wantIndex := map[string]uint64{}
	for i, tenant := range tenants {
		ev := event(i, tenant)
		r := e.mustAppend(t, ev)
		if r.Day != "2026-03-01" || r.Sequence != uint64(i+1) || r.LeafIndex != wantIndex[tenant] {
			t.Fatalf("event %d: receipt %+v, want sequence %d, leaf index %d", i, r, i+1, wantIndex[tenant])
		}
		wantIndex[tenant]++
		rec, err := e.log.Event(ev.RequestID)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(rec.RequestBody, ev.RequestBody) || !bytes.Equal(rec.ResponseBody, ev.ResponseBody) || rec.BodiesPruned {
			t.Fatalf("bodies %q %q", rec.RequestBody, rec.ResponseBody)
		}
		if !bytes.Equal(rec.LeafHash, r.LeafHash) || !bytes.Equal(leaf.Hash(rec.LeafBytes), r.LeafHash) {
			t.Fatal("stored leaf does not hash to the receipt's leaf hash")
		}
		l := rec.Leaf
		if l.Sequence != r.Sequence || l.TenantID != tenant || l.ApplianceID != "app_test" || l.KeyID != ev.KeyID ||
			l.Status != 200 || l.PromptTokens != int64(i) || l.RequestSHA256 != leaf.BodyHash(ev.RequestBody) ||
			l.ResponseSHA256 != leaf.BodyHash(ev.ResponseBody) || l.Time != leaf.FormatTime(ev.Time) {
			t.Fatalf("stored leaf %+v", l)
		}
		if bytes.Contains(rec.LeafBytes, ev.RequestBody) || bytes.Contains(rec.LeafBytes, ev.ResponseBody) {
			t.Fatal("a leaf holds a body")
		}
	}
}

func TestAppendRefuses(t *testing.T) {
	e := newEnv(t, Options{})
	e.mustAppend(t, event(1, "acme"))
	tests := []struct {
		name   string
		mutate func(*Event)
		want   error
	}{
		{"duplicate request id", func(ev *Event) {}, ErrDuplicate},
		{"bad request id", func(ev *Event) { ev.RequestID = "r-2" }, ErrInvalid},
		{"bad tenant", func(ev *Event) { ev.RequestID, ev.TenantID = "req_x2", "Acme" }, ErrInvalid},
		{"no key", func(ev *Event) { ev.RequestID, ev.KeyID = "req_x3", "" }, ErrInvalid},
		{"bad status", func(ev *Event) { ev.RequestID, ev.Status = "req_x4", 0 }, ErrInvalid},
		{"bad decision", func(ev *Event) { ev.RequestID, ev.PolicyDecisionID = "req_x5", "x" }, ErrInvalid},
		{"no endpoint", func(ev *Event) { ev.RequestID, ev.Endpoint = "req_x6", "" }, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := event(1, "acme")
			tt.mutate(&ev)
			_, err := e.log.Append(context.Background(), ev)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Append = %v, want %v", err, tt.want)
			}
		})
	}
	// Refused events consume no sequence number.
	if r := e.mustAppend(t, event(2, "acme")); r.Sequence != 2 {
		t.Fatalf("sequence after refusals = %d, want 2", r.Sequence)
	}
}

func TestDuplicateInOneBatch(t *testing.T) {
	e := newEnv(t, Options{})
	var batch []*pending
	for range 2 {
		p, err := e.log.prepare(event(1, "acme"))
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, p)
	}
	e.log.syncSlots <- struct{}{} // as the committer does before a batch
	e.log.commit(batch)           // one journal write, as the committer would
	for _, p := range batch {
		<-p.done
	}
	if batch[0].err != nil || !errors.Is(batch[1].err, ErrDuplicate) {
		t.Fatalf("errors %v, %v; want nil, ErrDuplicate", batch[0].err, batch[1].err)
	}
	if r := e.mustAppend(t, event(2, "acme")); r.Sequence != 2 {
		t.Fatalf("next sequence %d, want 2", r.Sequence)
	}
}

func TestConcurrentAppendsAreContiguous(t *testing.T) {
	e := newEnv(t, Options{})
	const writers, each = 8, 100
	var mu sync.Mutex
	seen := map[uint64]string{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			tenant := fmt.Sprintf("t%d", w%3)
			for i := range each {
				ev := event(w*each+i, tenant)
				r, err := e.log.Append(context.Background(), ev)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seen[r.Sequence] = ev.RequestID
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for seq := uint64(1); seq <= writers*each; seq++ {
		if seen[seq] == "" {
			t.Fatalf("sequence %d missing", seq)
		}
	}
	if len(seen) != writers*each {
		t.Fatalf("%d sequences, want %d", len(seen), writers*each)
	}
	if s := e.log.Stats(); s.Events != writers*each || s.Commits == 0 || s.Commits > s.Events {
		t.Fatalf("stats %+v", s)
	}
}

func TestSequencesAcrossRestart(t *testing.T) {
	e := newEnv(t, Options{})
	for i := range 3 {
		e.mustAppend(t, event(i, "acme"))
	}
	e.reopen(t, Options{})
	if r := e.mustAppend(t, event(3, "globex")); r.Sequence != 4 || r.LeafIndex != 0 {
		t.Fatalf("after restart: %+v, want sequence 4, leaf 0", r)
	}
	if r := e.mustAppend(t, event(4, "acme")); r.Sequence != 5 || r.LeafIndex != 3 {
		t.Fatalf("after restart: %+v, want sequence 5, leaf 3", r)
	}
	if _, err := e.log.Append(context.Background(), event(0, "acme")); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate across restart: %v", err)
	}
}

func TestOpenRefusesAnotherAppliance(t *testing.T) {
	e := newEnv(t, Options{})
	if err := e.log.Close(); err != nil {
		t.Fatal(err)
	}
	other := newTestPKI(t, "app_other")
	if _, err := Open(e.dir, Options{Signer: other.app}); err == nil {
		t.Fatal("Open accepted a log of another appliance")
	}
	if _, err := Open(e.dir, Options{ApplianceID: "app_test", Signer: other.app}); err == nil {
		t.Fatal("Open accepted a certificate of another appliance")
	}
}

func TestCloseDrainsAndRefuses(t *testing.T) {
	e := newEnv(t, Options{})
	e.mustAppend(t, event(1, "acme"))
	if err := e.log.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.log.Append(context.Background(), event(2, "acme")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close = %v", err)
	}
	if err := e.log.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

// TestQueueFullBlocks holds the committer, fills the bounded queue, and
// checks that one more append waits (never dropped), gives up with its
// context unrecorded, and that the queued ones commit once released.
func TestQueueFullBlocks(t *testing.T) {
	e := newEnv(t, Options{QueueSize: 2, MaxBatch: 1})
	e.log.writeMu.Lock()
	var queued []*pending
	for i := range 3 {
		p, err := e.log.prepare(event(i, "acme"))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.log.enqueue(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		queued = append(queued, p)
		for i == 0 && len(e.log.queue) > 0 {
			runtime.Gosched() // until the committer holds the first
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	blocked := make(chan error, 1)
	go func() {
		_, err := e.log.Append(ctx, event(9, "acme"))
		blocked <- err
	}()
	for e.log.Stats().QueueFullWaits == 0 {
		runtime.Gosched()
	}
	cancel()
	if err := <-blocked; !errors.Is(err, context.Canceled) {
		t.Fatalf("blocked Append = %v, want context.Canceled", err)
	}
	e.log.writeMu.Unlock()
	for i, p := range queued {
		<-p.done
		if p.err != nil || p.receipt.Sequence != uint64(i+1) {
			t.Fatalf("queued append %d: %+v, %v", i, p.receipt, p.err)
		}
	}
	if _, err := e.log.Event("req_acme9"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the abandoned append was recorded: %v", err)
	}
}

func TestCommitFailureIsLoud(t *testing.T) {
	e := newEnv(t, Options{})
	e.mustAppend(t, event(1, "acme"))
	if err := e.log.db.Close(); err != nil { // make the next commit fail
		t.Fatal(err)
	}
	if _, err := e.log.Append(context.Background(), event(2, "acme")); !errors.Is(err, ErrFailed) {
		t.Fatalf("Append with a failing disk = %v, want ErrFailed", err)
	}
	if _, err := e.log.Append(context.Background(), event(3, "acme")); !errors.Is(err, ErrFailed) {
		t.Fatalf("Append after a failed commit = %v, want ErrFailed", err)
	}
}

// TestOpenRefusesOtherFormat: a log of another layout version is refused
// with a message saying what to do.
func TestOpenRefusesOtherFormat(t *testing.T) {
	e := newEnv(t, Options{})
	err := e.log.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(metaFormat, []byte("tollgate-audit-bbolt/v1"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.log.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := Open(e.dir, Options{Signer: e.pki.app, Now: e.clock.Now})
	if err == nil {
		_ = l.Close()
		t.Fatal("Open accepted a v1 log")
	}
	if !strings.Contains(err.Error(), "v1") || !strings.Contains(err.Error(), "new --data directory") {
		t.Fatalf("Open = %v", err)
	}
}
