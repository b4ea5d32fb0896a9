package limits

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tollgate-dev/tollgate/internal/clocktest"
	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/server/keys"
)

func TestMain(m *testing.M) { etcdtest.Main(m) }

// newClock returns the fake clock shared by the gateways of a test: time
// moves only when the test moves it.
func newClock() *clocktest.Clock {
	return clocktest.New(time.Date(2026, 11, 23, 10, 0, 5, 0, time.UTC))
}

// gateway is one Limiter with its own etcd client, as one gateway process.
type gateway struct {
	*Limiter
	cli    *clientv3.Client
	cancel context.CancelFunc
	done   chan struct{}
}

// cluster describes the gateways a test starts.
type cluster struct {
	n         int
	clk       *clocktest.Clock
	prefix    string                 // shared key space; default: a fresh one
	endpoints map[int][]string       // per gateway, instead of the shared server
	tune      func(i int, c *Config) // adjusts gateway i's config
}

// start starts the gateways; Run stops (giving back what they hold) when
// the test ends, unless stopped earlier.
func (c cluster) start(tb testing.TB) []*gateway {
	tb.Helper()
	if c.prefix == "" {
		c.prefix = etcdtest.Prefix(tb)
	}
	gws := make([]*gateway, c.n)
	for i := range gws {
		eps := etcdtest.Endpoints(tb)
		if e, ok := c.endpoints[i]; ok {
			eps = e
		}
		cli := etcdtest.ClientAt(tb, eps, c.prefix)
		cfg := Config{GatewayID: "gw" + strconv.Itoa(i), Now: c.clk.Now}
		if c.tune != nil {
			c.tune(i, &cfg)
		}
		ctx, cancel := context.WithCancel(context.Background())
		g := &gateway{Limiter: New(cli, cfg), cli: cli, cancel: cancel, done: make(chan struct{})}
		go func() { _ = g.Run(ctx); close(g.done) }()
		tb.Cleanup(g.stop)
		gws[i] = g
	}
	for _, g := range gws { // every counter change from here on reaches every gateway
		await(tb, g.watching, "the watch to start")
	}
	return gws
}

func startGateways(tb testing.TB, n int, clk *clocktest.Clock) []*gateway {
	tb.Helper()
	return cluster{n: n, clk: clk}.start(tb)
}

// stop ends Run, which gives back everything the gateway holds.
func (g *gateway) stop() { g.cancel(); <-g.done }

// quiesce waits until no background operation is in flight.
func (g *gateway) quiesce(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := g.bg.wait(ctx); err != nil {
		tb.Fatalf("background operations still running: %v", err)
	}
}

// held is what the gateway holds of the key's current window.
func (g *gateway) held(p *keys.Principal, k kind) int64 {
	ks := g.state(p)
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.bucket(k).local
}

// counter reads a window's etcd counter of the key.
func counter(tb testing.TB, cli *clientv3.Client, p *keys.Principal, k kind, at time.Time) int64 {
	tb.Helper()
	_, _, name := window(k, at)
	resp, err := cli.Get(context.Background(), counterKey(p.TenantID, p.KeyID, k, name))
	if err != nil {
		tb.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return 0
	}
	v, err := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

func principal(rpm, tpd int64) *keys.Principal {
	return keys.NewPrincipal("acme", "key_test", "test", true, nil, rpm, tpd, nil, time.Time{})
}

// await receives from ch; the guard only turns a hang into a failure.
func await[T any](tb testing.TB, ch <-chan T, what string) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		tb.Fatalf("waited a minute for %s", what)
		panic("unreachable")
	}
}

func isDenied(err error, r Reason) bool {
	var d *Denied
	return errors.As(err, &d) && d.Reason == r
}
