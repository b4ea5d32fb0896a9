package keys

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tollgate-dev/tollgate/internal/etcdtest"
)

func TestMain(m *testing.M) { etcdtest.Main(m) }

// awaitTimeout bounds every wait for an event; waits end as soon as the
// event happens.
const awaitTimeout = 15 * time.Second

// await polls cond until it holds, failing the test after awaitTimeout.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(awaitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v waiting for %s", awaitTimeout, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// fakeClock is a settable clock; with tick set, every reading advances it.
type fakeClock struct {
	mu   sync.Mutex
	t    time.Time
	tick time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.t
	c.t = c.t.Add(c.tick)
	return now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// testLogger logs to the test's output.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// runCache starts a cache over cli, waits until it has loaded, and stops it
// when the test ends.
func runCache(t *testing.T, cli *clientv3.Client, now func() time.Time) *Cache {
	t.Helper()
	c := NewCache(cli, now, testLogger(t))
	c.minBackoff, c.maxBackoff = 10*time.Millisecond, 200*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("cache Run returned %v, want context.Canceled", err)
		}
	})
	select {
	case <-c.Ready():
	case err := <-done:
		t.Fatalf("cache stopped before ready: %v", err)
	case <-time.After(awaitTimeout):
		t.Fatal("cache not ready")
	}
	return c
}

// authenticates reports whether c accepts secret.
func authenticates(c *Cache, secret string) bool {
	_, err := c.Authenticate(secret)
	return err == nil
}

// mustCreate creates a key or fails the test.
func mustCreate(t *testing.T, s *Store, spec Spec) (keyID, secret string) {
	t.Helper()
	k, secret, err := s.Create(context.Background(), spec)
	if err != nil {
		t.Fatalf("create %+v: %v", spec, err)
	}
	return k.GetKeyId(), secret
}

// controlledWatcher lets a test hold back or break the watches made through
// it.
type controlledWatcher struct {
	clientv3.Watcher
	entered chan int // receives the number of each Watch call

	mu     sync.Mutex
	calls  int
	gate   chan struct{} // when set, the first Watch waits until it is closed
	cancel context.CancelFunc
}

func watchThrough(cli *clientv3.Client) *controlledWatcher {
	w := &controlledWatcher{Watcher: cli.Watcher, entered: make(chan int, 100)}
	cli.Watcher = w
	return w
}

func (w *controlledWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	w.mu.Lock()
	w.calls++
	n, gate := w.calls, w.gate
	w.gate = nil
	ctx, w.cancel = context.WithCancel(ctx)
	w.mu.Unlock()
	w.entered <- n
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
		}
	}
	return w.Watcher.Watch(ctx, key, opts...)
}

// breakWatch ends the current watch, as a lost connection would.
func (w *controlledWatcher) breakWatch() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cancel()
}
