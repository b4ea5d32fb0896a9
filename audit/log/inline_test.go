package log

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/durable"
)

// TestInlineAndCommitterMixed: appends that may commit inline (their
// context cannot end) and appends that always go through the committer
// (a context that can), concurrently, with one and with three syncs in
// flight (where none goes inline). Every sequence is taken once, and
// batches are acknowledged in journal order: when an append returns, every
// event before it in the journal has been acknowledged (Stats.Events
// counts them at their acknowledgement). With one sync, both paths must
// have committed.
func TestInlineAndCommitterMixed(t *testing.T) {
	for _, syncs := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d syncs", syncs), func(t *testing.T) {
			e := newEnv(t, Options{MaxSyncsInFlight: syncs})
			e.mustAppend(t, event(0, "t0")) // idle: inline
			const writers, each = 8, 60
			var (
				mu   sync.Mutex
				seen = map[uint64]string{}
				wg   sync.WaitGroup
			)
			for w := range writers {
				wg.Go(func() {
					ctx := context.Background()
					if w%2 == 1 {
						c, cancel := context.WithCancel(ctx)
						defer cancel()
						ctx = c // can end: never inline
					}
					for i := range each {
						ev := event(1+w*each+i, fmt.Sprintf("t%d", w%3))
						r, err := e.log.Append(ctx, ev)
						if err != nil {
							t.Error(err)
							return
						}
						if acked := e.log.Stats().Events; acked < r.Sequence {
							t.Errorf("%s returned with sequence %d, %d events acknowledged: acknowledged out of journal order",
								ev.RequestID, r.Sequence, acked)
						}
						if r.Signed() == nil {
							t.Errorf("%s: receipt without a signed batch", ev.RequestID)
						}
						mu.Lock()
						seen[r.Sequence] = ev.RequestID
						mu.Unlock()
						if i%7 == 0 {
							time.Sleep(time.Duration(w) * 100 * time.Microsecond) // idle moments
						}
					}
				})
			}
			wg.Wait()
			const total = 1 + writers*each
			for seq := uint64(1); seq <= total; seq++ {
				if seen[seq] == "" && seq != 1 {
					t.Fatalf("sequence %d missing", seq)
				}
			}
			st := e.log.Stats()
			if st.Events != total || len(seen) != total-1 {
				t.Fatalf("%d events, %d receipts; want %d", st.Events, len(seen), total)
			}
			if syncs == 1 && (st.InlineCommits == 0 || st.InlineCommits >= st.Commits) {
				t.Fatalf("%d inline commits of %d: want both paths", st.InlineCommits, st.Commits)
			}
			if syncs > 1 && st.InlineCommits != 0 {
				t.Fatalf("%d inline commits with %d syncs in flight, want none", st.InlineCommits, syncs)
			}
			e.reopen(t, Options{MaxSyncsInFlight: syncs})
			for _, id := range seen {
				if _, err := e.log.Event(id); err != nil {
					t.Fatalf("%s after reopen: %v", id, err)
				}
			}
		})
	}
}

// TestInlineCommitFailure: the sync of an inline commit fails. Its append
// fails with ErrFailed, and so does one queued behind it meanwhile, only
// once the journal is cut back to the acknowledged end; nothing of either
// is replayed at the next open.
func TestInlineCommitFailure(t *testing.T) {
	e := newEnv(t, Options{})
	e.mustAppend(t, event(0, "acme"))
	acked := e.log.durable.Load()
	path := e.journalOf("2026-03-01")

	errSync := errors.New("injected sync failure")
	syncing, proceed := holdFirstSync(t, errSync)

	inline := make(chan error, 1)
	go func() {
		_, err := e.log.Append(context.Background(), event(1, "acme"))
		inline <- err
	}()
	<-syncing
	if n := e.log.Stats().InlineCommits; n != 2 {
		t.Fatalf("%d inline commits, want 2: the failing one did not commit inline", n)
	}
	// Queued for the committer while the inline commit syncs (or, if
	// it is slower to get there, after the failure): refused either way.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	queued := make(chan error, 1)
	go func() {
		_, err := e.log.Append(ctx, event(2, "acme"))
		queued <- err
	}()
	close(proceed)
	if err := <-inline; !errors.Is(err, ErrFailed) || !errors.Is(err, errSync) {
		t.Fatalf("inline Append with a failing sync = %v, want ErrFailed with the sync's error", err)
	}
	if got := fileSize(t, path); got != acked {
		t.Fatalf("journal is %d bytes once the failed append returned, want the acknowledged end %d", got, acked)
	}
	if err := <-queued; !errors.Is(err, ErrFailed) {
		t.Fatalf("Append queued behind the failed commit = %v, want ErrFailed", err)
	}
	if _, err := e.log.Append(context.Background(), event(3, "acme")); !errors.Is(err, ErrFailed) {
		t.Fatalf("Append after the failure = %v, want ErrFailed", err)
	}
	if ok, _ := e.log.Healthy(); ok {
		t.Fatal("log healthy after a failed commit")
	}
	e.reopen(t, Options{})
	for _, n := range []int{1, 2, 3} {
		if _, err := e.log.Event(fmt.Sprintf("req_acme%d", n)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("failed append %d replayed: %v", n, err)
		}
	}
	if r := e.mustAppend(t, event(4, "acme")); r.Sequence != 2 {
		t.Fatalf("sequence after the failure %d, want 2", r.Sequence)
	}
}

// TestInlineCommitFailedWrite: the journal write of an inline commit
// fails; its append fails with ErrFailed and the log refuses appends.
func TestInlineCommitFailedWrite(t *testing.T) {
	e := newEnv(t, Options{})
	e.mustAppend(t, event(0, "acme"))
	errWrite := errors.New("injected write failure")
	batchWrite = func(f *os.File, b []byte, off int64) (int, error) {
		n, _ := f.WriteAt(b[:len(b)/2], off) // a partial write
		return n, errWrite
	}
	t.Cleanup(func() { batchWrite = (*os.File).WriteAt })
	if _, err := e.log.Append(context.Background(), event(1, "acme")); !errors.Is(err, ErrFailed) || !errors.Is(err, errWrite) {
		t.Fatalf("inline Append with a failing write = %v, want ErrFailed with the write's error", err)
	}
	if n := e.log.Stats().InlineCommits; n != 2 {
		t.Fatalf("%d inline commits, want 2", n)
	}
	if _, err := e.log.Append(context.Background(), event(2, "acme")); !errors.Is(err, ErrFailed) {
		t.Fatalf("Append after the failure = %v, want ErrFailed", err)
	}
	e.reopen(t, Options{})
	if _, err := e.log.Event("req_acme1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("failed append replayed: %v", err)
	}
}

// TestCloseDuringInlineCommit: Close waits for an inline commit to be
// acknowledged, and the event it committed is in the log; an append
// after Close is refused.
func TestCloseDuringInlineCommit(t *testing.T) {
	e := newEnv(t, Options{})
	e.mustAppend(t, event(0, "acme"))
	syncing, proceed := holdFirstSync(t, nil)

	appended := make(chan error, 1)
	go func() {
		_, err := e.log.Append(context.Background(), event(1, "acme"))
		appended <- err
	}()
	<-syncing
	closed := make(chan error, 1)
	go func() { closed <- e.log.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while an inline commit was syncing", err)
	case err := <-appended:
		t.Fatalf("Append returned (%v) before its sync", err)
	case <-time.After(50 * time.Millisecond): // a failure would show as an early return
	}
	close(proceed)
	if err := <-appended; err != nil {
		t.Fatalf("inline Append during Close = %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, err := e.log.Append(context.Background(), event(2, "acme")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close = %v, want ErrClosed", err)
	}
	e.reopen(t, Options{})
	if _, err := e.log.Event("req_acme1"); err != nil {
		t.Fatalf("the inline commit's event after Close: %v", err)
	}
}

// TestInlineOnlyWhenIdle: an append that finds a batch syncing does not
// commit inline; it queues and joins the committer's next batch.
func TestInlineOnlyWhenIdle(t *testing.T) {
	e := newEnv(t, Options{})
	syncing, proceed := holdFirstSync(t, nil)
	first := make(chan error, 1)
	go func() {
		_, err := e.log.Append(context.Background(), event(0, "acme"))
		first <- err
	}()
	<-syncing
	behind := make(chan Receipt, 3)
	for i := 1; i <= 3; i++ {
		go func() {
			r, err := e.log.Append(context.Background(), event(i, "acme"))
			if err != nil {
				t.Error(err)
			}
			behind <- r
		}()
	}
	// The committer, waiting for an append, takes the first and waits
	// for the slot; the other two wait in the queue.
	for len(e.log.queue) < 2 {
		time.Sleep(time.Millisecond)
	}
	close(proceed)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if r := <-behind; r.Sequence < 2 || r.Sequence > 4 {
			t.Fatalf("sequence %d behind the first, want 2..4", r.Sequence)
		}
	}
	if st := e.log.Stats(); st.InlineCommits != 1 || st.Commits != 2 {
		t.Fatalf("%d inline commits of %d, want 1 of 2: the appends behind a sync share one batch", st.InlineCommits, st.Commits)
	}
}

// holdFirstSync makes the next batch sync close syncing and wait until
// proceed is closed, then fail with err, or sync when err is nil; later
// syncs sync. The test's cleanup puts the real sync back.
func holdFirstSync(t *testing.T, err error) (syncing <-chan struct{}, proceed chan struct{}) {
	t.Helper()
	var once sync.Once
	started := make(chan struct{})
	proceed = make(chan struct{})
	batchSync = func(f *os.File) error {
		held := false
		once.Do(func() {
			close(started)
			<-proceed
			held = true
		})
		if held && err != nil {
			return err
		}
		return durable.DataSync(f)
	}
	t.Cleanup(func() { batchSync = durable.DataSync })
	return started, proceed
}
