package log

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestStartInlineOnlyWhenIdleAndFast: a start is written and synced on
// its caller's goroutine only when the start file is idle, its last sync
// was fast and the start's context cannot end; otherwise the committer
// takes it. Either way the marker is durable once Wait returns.
func TestStartInlineOnlyWhenIdleAndFast(t *testing.T) {
	tests := []struct {
		name string
		// syncFor is how long each sync takes by the log's clock.
		syncFor time.Duration
		// first: no sync has been measured yet.
		first bool
		// busy holds the slot, as the committer does for a batch.
		busy bool
		// cancelable gives BeginStart a context that can end.
		cancelable bool
		want       bool // inline
	}{
		{name: "idle, fast sync", want: true},
		{name: "sync as long as the bound", syncFor: inlineStartSyncMax, want: true},
		{name: "no sync measured yet", first: true},
		{name: "slow sync", syncFor: inlineStartSyncMax + time.Microsecond},
		{name: "committer busy", busy: true},
		{name: "context can end", cancelable: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e *env
			e = newEnv(t, Options{SyncStarts: func(f *os.File) error {
				e.clock.Advance(tt.syncFor)
				return f.Sync()
			}})
			ctx := context.Background()
			if !tt.first {
				if err := e.log.Start(ctx, streamStart(1, "acme")); err != nil {
					t.Fatal(err)
				}
				e.startsIdle()
				if n := e.log.Stats().InlineStarts; n != 0 {
					t.Fatalf("the first start, with no sync measured, was synced inline (InlineStarts %d)", n)
				}
			}
			if tt.cancelable {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
			}
			if tt.busy {
				e.log.starts.slot.Lock()
			}
			before := e.log.Stats().InlineStarts
			s := streamStart(2, "acme")
			p, err := e.log.BeginStart(ctx, s)
			if tt.busy {
				e.log.starts.slot.Unlock()
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Wait(context.Background()); err != nil {
				t.Fatalf("Wait: %v", err)
			}
			if got := e.log.Stats().InlineStarts - before; (got == 1) != tt.want || got > 1 {
				t.Errorf("InlineStarts grew by %d; want inline %v", got, tt.want)
			}
			c := e.crashCopy(t)
			if r, err := c.log.Event(s.RequestID); err != nil || r.Leaf.Status != StatusInterrupted {
				t.Errorf("the start after a crash: %+v, %v; want an interrupted event", r.Leaf, err)
			}
		})
	}
}

// TestStartInlineFailedSync: an inline start whose sync fails is refused
// (Wait returns the error), fails the log as the committer's would, and
// leaves no marker behind.
func TestStartInlineFailedSync(t *testing.T) {
	injected := errors.New("injected start sync failure")
	fail := false
	e := newEnv(t, Options{SyncStarts: func(f *os.File) error {
		if fail {
			return injected
		}
		return f.Sync()
	}})
	if err := e.log.Start(context.Background(), streamStart(1, "acme")); err != nil {
		t.Fatal(err)
	}
	e.startsIdle()
	fail = true
	p, err := e.log.BeginStart(context.Background(), streamStart(2, "acme"))
	if err != nil {
		t.Fatal(err)
	}
	if got := e.log.Stats().InlineStarts; got != 1 {
		t.Fatalf("InlineStarts %d, want 1: the start was not inline", got)
	}
	if err := p.Wait(context.Background()); !errors.Is(err, injected) {
		t.Fatalf("Wait after a failed inline sync: %v, want the sync's error", err)
	}
	if ok, _ := e.log.Healthy(); ok {
		t.Error("the log is healthy after a failed start sync")
	}
	markers, _, err := readStarts(filepath.Join(e.journal, StartsFile))
	if err != nil || len(markers) != 1 {
		t.Fatalf("start file after the failed sync: %d markers, %v; want the first start's alone", len(markers), err)
	}
}

// startsIdle returns once the start committer has let go of the slot: a
// start's Wait returns while the committer still holds it, for the
// batch's compaction.
func (e *env) startsIdle() {
	e.log.starts.slot.Lock()
	e.log.starts.slot.Unlock() //nolint:staticcheck // an empty critical section: waits for the holder
}
