package etcdembed

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"
)

// Start on a directory another etcd holds blocks inside etcd on the bbolt
// file lock; it must still return when ctx is done, and the etcd it gave
// up on is closed once it does start.
func TestStartHonoursContextWhileEtcdBlocks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etcd")
	logger := slog.New(slog.DiscardHandler)
	first, err := Start(context.Background(), dir, logger)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			first.Close()
		}
	}()

	// Nothing reports that the second start is stuck on the lock, so its
	// context simply expires; the guard below is what fails the test.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		s, err := Start(ctx, dir, logger)
		if s != nil {
			s.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("second Start: %v, want the context's error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("second Start still blocked 30s after its context expired")
	}

	// With the first gone the abandoned start completes, and is closed.
	first.Close()
	closed = true
	pending.Wait()
}
