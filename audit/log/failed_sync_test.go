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
