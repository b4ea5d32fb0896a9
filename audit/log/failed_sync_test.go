package log

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/durable"
)

// failBatchSyncs makes every batch sync fail until the test ends.
func failBatchSyncs(t *testing.T) error {
	errSync := errors.New("injected sync failure")
	batchSync = func(*os.File) error { return errSync }
	t.Cleanup(func() { batchSync = durable.DataSync })
	return errSync
}

// TestFailedBatchesAreNotReplayed: Linux reports a failed writeback once
// and may keep the pages readable, so the frames of batches whose sync
// failed can still be read from the journal in the same boot. A reopen,
// after a Close or after a crash, must not apply them: their appends were
// told that they failed. With overlapping syncs, the batches behind the
// failed one fail too, whatever their own syncs return.
func TestFailedBatchesAreNotReplayed(t *testing.T) {
	for _, syncs := range []int{1, 3} {
		for _, crash := range []bool{false, true} {
			name := fmt.Sprintf("syncs=%d/close", syncs)
			if crash {
				name = fmt.Sprintf("syncs=%d/crash", syncs)
			}
			t.Run(name, func(t *testing.T) { testFailedBatchesAreNotReplayed(t, syncs, crash) })
		}
	}
}

func testFailedBatchesAreNotReplayed(t *testing.T, syncs int, crash bool) {
	e := newEnv(t, Options{MaxSyncsInFlight: syncs})
	e.mustAppend(t, event(0, "acme"))
	acked := e.log.durable.Load()
	if ok, detail := e.log.Healthy(); !ok {
		t.Fatalf("Healthy before the failure = false, %q", detail)
	}
	errSync := failBatchSyncs(t)

	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = e.log.Append(context.Background(), event(i+1, []string{"acme", "globex"}[i%2]))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, ErrFailed) {
			t.Fatalf("append %d with failing syncs = %v, want ErrFailed", i+1, err)
		}
	}
	if _, err := e.log.Append(context.Background(), event(20, "acme")); !errors.Is(err, ErrFailed) || !errors.Is(err, errSync) {
		t.Fatalf("append after the failure = %v, want ErrFailed with the sync's error", err)
	}

	if ok, detail := e.log.Healthy(); ok || !strings.Contains(detail, errSync.Error()) {
		t.Errorf("Healthy after the failure = %v, %q; want false naming the sync's error", ok, detail)
	}

	// By the time the appends learned that they failed, nothing past the
	// acknowledged end is left to read: that is what a crash now leaves.
	path := journalPath(e.journal, "2026-03-01")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if tail := raw[acked:]; !bytes.Equal(tail, make([]byte, len(tail))) {
		t.Fatalf("journal holds %d non-zero bytes past the acknowledged end %d after the failure",
			len(tail)-bytes.Count(tail, []byte{0}), acked)
	}

	dir := e.dir
	if crash {
		dir = copyTree(t, e.dir) // the files as the process would leave them
	} else if err := e.log.Close(); err != nil {
		t.Logf("Close after the failure: %v", err)
	}
	batchSync = durable.DataSync
	l, err := Open(dir, Options{Signer: e.pki.app, Now: e.clock.Now, MaxSyncsInFlight: syncs})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := l.Stats().Replayed; got != 0 {
		t.Errorf("reopen replayed %d events of failed batches", got)
	}
	for i := range errs {
		id := event(i+1, []string{"acme", "globex"}[i%2]).RequestID
		if _, err := l.Event(id); !errors.Is(err, ErrNotFound) {
			t.Errorf("event %s of a failed batch after reopen: %v, want ErrNotFound", id, err)
		}
	}
	if _, err := l.Event(event(0, "acme").RequestID); err != nil {
		t.Errorf("acknowledged event after reopen: %v", err)
	}
	r, err := l.Append(context.Background(), event(1, "globex"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Sequence != 2 {
		t.Errorf("first append after reopen has sequence %d, want 2", r.Sequence)
	}
	if !crash {
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Size() < int64(acked) {
			t.Errorf("journal cut to %d bytes, below the acknowledged end %d", info.Size(), acked)
		}
	}
}

// copyTree copies the regular files under dir to a new directory.
func copyTree(t *testing.T, dir string) string {
	t.Helper()
	to := t.TempDir()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o700)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), raw, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return to
}

// TestBatchesBehindAFailedSyncFail: with syncs overlapping, batches
// journaled behind one whose sync fails fail too, though their own syncs
// succeed, and no append of them returns before the journal is cut at the
// acknowledged end: a crash at the moment a client hears of the failure
// leaves nothing of them to replay.
func TestBatchesBehindAFailedSyncFail(t *testing.T) {
	e := newEnv(t, Options{MaxSyncsInFlight: 3})
	e.mustAppend(t, event(0, "acme"))
	acked := e.log.durable.Load()

	errSync := errors.New("injected sync failure")
	var (
		mu       sync.Mutex
		calls    int
		failing  = make(chan struct{})
		proceed  = make(chan struct{})
		behindOK = make(chan struct{}, 8)
	)
	batchSync = func(f *os.File) error {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			close(failing)
			<-proceed
			return errSync
		}
		err := durable.DataSync(f)
		behindOK <- struct{}{}
		return err
	}
	t.Cleanup(func() { batchSync = durable.DataSync })

	type result struct {
		n   int
		err error
	}
	results := make(chan result, 3)
	appendAsync := func(n int) {
		go func() {
			_, err := e.log.Append(context.Background(), event(n, "acme"))
			results <- result{n, err}
		}()
	}
	appendAsync(1)
	<-failing
	// Two more batches, each journaled and synced while the first one's
	// sync hangs: a sync slot each.
	appendAsync(2)
	<-behindOK
	appendAsync(3)
	<-behindOK

	// Hold the writer, which the scrub needs, and let the first sync fail:
	// no append may return while the journal still holds their frames.
	e.log.writeMu.Lock()
	close(proceed)
	select {
	case r := <-results:
		e.log.writeMu.Unlock()
		t.Fatalf("append %d returned (%v) before the journal was cut", r.n, r.err)
	case <-time.After(50 * time.Millisecond): // a failure would show as an early return
	}
	e.log.writeMu.Unlock()

	path := journalPath(e.journal, "2026-03-01")
	for range 3 {
		r := <-results
		if !errors.Is(r.err, ErrFailed) {
			t.Errorf("append %d behind the failed sync = %v, want ErrFailed", r.n, r.err)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if tail := raw[min(acked, uint64(len(raw))):]; !bytes.Equal(tail, make([]byte, len(tail))) || uint64(len(raw)) < acked {
			t.Fatalf("when append %d returned, the journal held %d bytes, %d of them non-zero past the acknowledged end %d",
				r.n, len(raw), len(tail)-bytes.Count(tail, []byte{0}), acked)
		}
	}
	if got := e.log.durable.Load(); got != acked {
		t.Errorf("acknowledged end moved from %d to %d past a failed sync", acked, got)
	}
}

// TestFailedWriteBehindASyncingBatch: a batch whose write fails part way
// (a full disk) fails in order behind the batch still syncing ahead of
// it, which is acknowledged; the journal is then cut after that batch,
// and a reopen has the acknowledged event and nothing of the failed one.
func TestFailedWriteBehindASyncingBatch(t *testing.T) {
	e := newEnv(t, Options{MaxSyncsInFlight: 3})
	e.mustAppend(t, event(0, "acme"))

	errWrite := errors.New("injected write failure")
	var (
		mu               sync.Mutex
		syncs, writes    int
		syncing, written = make(chan struct{}), make(chan struct{})
		proceed          = make(chan struct{})
	)
	batchSync = func(f *os.File) error {
		mu.Lock()
		syncs++
		first := syncs == 1
		mu.Unlock()
		if first {
			close(syncing)
			<-proceed
		}
		return durable.DataSync(f)
	}
	batchWrite = func(f *os.File, b []byte, off int64) (int, error) {
		mu.Lock()
		writes++
		second := writes == 2
		mu.Unlock()
		if !second {
			return f.WriteAt(b, off)
		}
		defer close(written)
		n, err := f.WriteAt(b[:len(b)/2], off)
		if err != nil {
			return n, err
		}
		return n, errWrite
	}
	t.Cleanup(func() { batchSync, batchWrite = durable.DataSync, (*os.File).WriteAt })

	type result struct {
		r   Receipt
		err error
	}
	first, second := make(chan result, 1), make(chan result, 1)
	go func() {
		r, err := e.log.Append(context.Background(), event(1, "acme"))
		first <- result{r, err}
	}()
	<-syncing
	go func() {
		r, err := e.log.Append(context.Background(), event(2, "acme"))
		second <- result{r, err}
	}()
	<-written
	close(proceed)

	if r := <-first; r.err != nil || r.r.Sequence != 2 {
		t.Fatalf("append synced ahead of the failed write = %+v, %v; want sequence 2", r.r, r.err)
	}
	if r := <-second; !errors.Is(r.err, ErrFailed) || !errors.Is(r.err, errWrite) {
		t.Fatalf("append whose write failed = %v, want ErrFailed with the write's error", r.err)
	}
	acked := e.log.durable.Load()
	raw, err := os.ReadFile(journalPath(e.journal, "2026-03-01"))
	if err != nil {
		t.Fatal(err)
	}
	if tail := raw[min(acked, uint64(len(raw))):]; uint64(len(raw)) < acked || !bytes.Equal(tail, make([]byte, len(tail))) {
		t.Fatalf("journal of %d bytes after the failed write, acknowledged end %d: want it cut there", len(raw), acked)
	}

	batchSync, batchWrite = durable.DataSync, (*os.File).WriteAt
	e.reopen(t, Options{MaxSyncsInFlight: 3})
	if _, err := e.log.Event(event(1, "acme").RequestID); err != nil {
		t.Errorf("acknowledged event after reopen: %v", err)
	}
	if _, err := e.log.Event(event(2, "acme").RequestID); !errors.Is(err, ErrNotFound) {
		t.Errorf("event whose write failed, after reopen: %v, want ErrNotFound", err)
	}
	if r := e.mustAppend(t, event(3, "acme")); r.Sequence != 3 {
		t.Errorf("first append after reopen has sequence %d, want 3", r.Sequence)
	}
}

// TestRunEndsWhenTheLogFails: a failed log refuses every append until
// reopened, so Run, which the appliance runs beside its servers, returns
// the failure, and the appliance shuts down to be restarted.
func TestRunEndsWhenTheLogFails(t *testing.T) {
	e := newEnv(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	ticks := make(chan time.Time)
	go func() { ran <- e.log.RunTicks(ctx, ticks) }()
	ticks <- day1 // Run is past its first publication
	e.mustAppend(t, event(0, "acme"))
	select {
	case err := <-ran:
		t.Fatalf("Run returned %v before any failure", err)
	default:
	}

	errSync := failBatchSyncs(t)
	if _, err := e.log.Append(context.Background(), event(1, "acme")); !errors.Is(err, ErrFailed) {
		t.Fatalf("append with a failing sync = %v, want ErrFailed", err)
	}
	select {
	case err := <-ran:
		if !errors.Is(err, ErrFailed) || !errors.Is(err, errSync) {
			t.Fatalf("Run after the failure returned %v, want ErrFailed with the sync's error", err)
		}
	case <-time.After(10 * time.Second): // a guard against hanging, not a measurement
		t.Fatal("Run still running 10 s after the log failed")
	}
}
