package log

import (
	"context"
	"runtime"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestAppendsWhileHeadsAreSigned: a request's append waits neither for a
// head signing nor for the applier round it forces (caughtUp). With
// bbolt's write lock held, so that the round, and the heads' own
// transaction after it, cannot proceed, and SignHeads waiting for the
// round, appends still complete, inline and through the committer; the
// heads then count the events journaled before SignHeads was called.
// (A day's close is the exception: the first append of a new day waits
// for the previous day's batches, advanceTo.)
func TestAppendsWhileHeadsAreSigned(t *testing.T) {
	// Rounds run only when a reader waits (the first one at once).
	e := newEnv(t, Options{ApplyInterval: time.Hour})
	e.mustAppend(t, event(0, "acme"))
	if err := e.log.apply.caughtUp(); err != nil {
		t.Fatal(err)
	}

	held, release := make(chan struct{}), make(chan struct{})
	update := make(chan error, 1)
	go func() {
		update <- e.log.db.Update(func(*bolt.Tx) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	e.mustAppend(t, event(1, "acme")) // for the round SignHeads forces
	signed := make(chan error, 1)
	var count uint64
	go func() {
		heads, err := e.log.SignHeads(e.clock.Now())
		if len(heads) == 1 {
			count = heads[0].EventCount
		}
		signed <- err
	}()
	awaitApplyWaiter(e.log.apply)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{
		{"inline", context.Background()}, // Done is nil: committed on the caller's goroutine
		{"committer", ctx},
	} {
		for n := range 3 {
			if _, err := e.log.Append(tc.ctx, event(100*len(tc.name)+n, "acme")); err != nil {
				t.Fatalf("%s append %d while heads are signed: %v", tc.name, n, err)
			}
		}
	}
	select {
	case err := <-signed:
		t.Fatalf("SignHeads returned (%v) while bbolt's write lock was held: the test did not hold it mid-way", err)
	default:
	}

	close(release)
	if err := <-update; err != nil {
		t.Fatal(err)
	}
	if err := <-signed; err != nil {
		t.Fatal(err)
	}
	// The round may have taken the appends made meanwhile too.
	if count < 2 {
		t.Errorf("head counts %d events, want at least the 2 journaled before SignHeads", count)
	}
}

// awaitApplyWaiter returns once a caller waits for the applier to catch
// up (caughtUp).
func awaitApplyWaiter(a *applier) {
	for {
		a.mu.Lock()
		n := a.waiters
		a.mu.Unlock()
		if n > 0 {
			return
		}
		runtime.Gosched()
	}
}
