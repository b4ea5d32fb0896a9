package limits

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/server/keys"
)

func TestMain(m *testing.M) { etcdtest.Main(m) }

// clock is a fake clock shared by the gateways of a test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock {
	return &clock{t: time.Date(2026, 11, 23, 10, 0, 5, 0, time.UTC)}
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// gateway is one Limiter with its own etcd client, as one gateway process.
type gateway struct {
	*Limiter
	cli    *clientv3.Client
	cancel context.CancelFunc
	done   chan struct{}
}

// startGateways starts n gateways sharing one key space; Run stops (and
// gives back what they hold) when the test ends, unless stopped earlier.
func startGateways(t *testing.T, n int, clk *clock, endpoints ...[]string) []*gateway {
	t.Helper()
	prefix := etcdtest.Prefix(t)
	var gws []*gateway
	for i := range n {
		eps := etcdtest.Endpoints(t)
		if i < len(endpoints) && endpoints[i] != nil {
			eps = endpoints[i]
		}
		cli := etcdtest.ClientAt(t, eps, prefix)
		ctx, cancel := context.WithCancel(context.Background())
		g := &gateway{Limiter: New(cli, Config{Now: clk.Now}), cli: cli, cancel: cancel, done: make(chan struct{})}
		go func() { _ = g.Run(ctx); close(g.done) }()
		t.Cleanup(g.stop)
		gws = append(gws, g)
	}
	return gws
}

// stop ends Run, which gives back everything the gateway holds.
func (g *gateway) stop() { g.cancel(); <-g.done }

// counter reads an etcd counter of the key.
func counter(t *testing.T, cli *clientv3.Client, p *keys.Principal, k kind, at time.Time) int64 {
	t.Helper()
	_, _, name := window(k, at)
	resp, err := cli.Get(context.Background(), counterKey(p.TenantID, p.KeyID, k, name))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return 0
	}
	v, err := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func principal(rpm, tpd int64) *keys.Principal {
	return keys.NewPrincipal("acme", "key_test", "test", true, nil, rpm, tpd, nil, time.Time{})
}

// waitSettled waits for background settlements with a deadline.
func waitSettled(t *testing.T, inFlight *atomic.Int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for inFlight.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d tokens still reserved after 10s", inFlight.Load())
		}
		time.Sleep(time.Millisecond)
	}
}

// startGatewaysB is startGateways for benchmarks: one gateway in the key
// space prefix.
func startGatewaysB(b *testing.B, clk *clock, prefix string) *gateway {
	b.Helper()
	cli := etcdtest.ClientAt(b, etcdtest.Endpoints(b), prefix)
	ctx, cancel := context.WithCancel(context.Background())
	g := &gateway{Limiter: New(cli, Config{Now: clk.Now}), cli: cli, cancel: cancel, done: make(chan struct{})}
	go func() { _ = g.Run(ctx); close(g.done) }()
	b.Cleanup(g.stop)
	return g
}
