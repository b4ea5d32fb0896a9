package keys

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/namespace"
	"go.uber.org/zap"

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

var prefixSeq atomic.Int64

// sharedPrefix returns an etcd key prefix private to this call, for clients
// that must see each other's keys (two gateways of one site).
func sharedPrefix(t *testing.T) string {
	return fmt.Sprintf("/keys-test-%d-%s/", prefixSeq.Add(1), strings.ReplaceAll(t.Name(), "/", "_"))
}

// clientAt returns a client of endpoints confined to prefix, closed when
// the test ends.
func clientAt(t *testing.T, endpoints []string, prefix string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	cli.KV = namespace.NewKV(cli.KV, prefix)
	cli.Watcher = namespace.NewWatcher(cli.Watcher, prefix)
	cli.Lease = namespace.NewLease(cli.Lease, prefix)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
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

// proxy forwards TCP connections to an address and can cut them all and
// refuse new ones, standing in for etcd going away and coming back.
type proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.setDown(true)
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *proxy) forward(c net.Conn) {
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		_ = c.Close()
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		p.mu.Unlock()
		_ = c.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
	_, _ = io.Copy(c, up)
	_ = c.Close()
}

// setDown cuts every connection and refuses new ones (true), or lets
// connections through again (false).
func (p *proxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			_ = c.Close()
		}
		clear(p.conns)
	}
}
