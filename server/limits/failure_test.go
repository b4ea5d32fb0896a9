package limits

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/etcdtest"
)

// With etcd unreachable a gateway admits exactly what its held slice
// covers, then refuses with ErrUnavailable (never unlimited, never a
// per-process limit), at once and without touching etcd once it knows it
// is degraded, and says so in Healthy. When etcd returns it recovers by
// itself.
func TestEtcdOutage(t *testing.T) {
	clk := newClock()
	proxy := etcdtest.NewProxy(t)
	health := make(chan bool, 64)
	g := cluster{n: 1, clk: clk, endpoints: map[int][]string{0: proxy.Endpoints()},
		tune: func(_ int, c *Config) {
			c.GrantTimeout = 300 * time.Millisecond
			c.healthChanged = func(up bool) {
				select {
				case health <- up:
				default:
				}
			}
		}}.start(t)[0]
	p := principal(1000, 0)
	for range 50 { // build a rate, so the gateway holds a slice
		if _, err := g.Admit(context.Background(), p, 0); err != nil {
			t.Fatal(err)
		}
	}
	g.quiesce(t)
	held := g.held(p, rpm)
	if held == 0 {
		t.Fatal("no slice held; the test proves nothing")
	}

	proxy.SetDown(true)
	var admitted int64
	var err error
	for range 10_000 {
		// No deadline: the wait for etcd is bounded by GrantTimeout.
		if _, err = g.Admit(context.Background(), p, 0); err != nil {
			break
		}
		admitted++
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("after %d admissions during the outage: %v, want ErrUnavailable", admitted, err)
	}
	if admitted != held {
		t.Fatalf("admitted %d during the outage, held %d", admitted, held)
	}
	g.quiesce(t)
	if ok, why := g.Healthy(); ok {
		t.Fatalf("healthy during the outage (%s)", why)
	} else {
		t.Logf("health: %s", why)
	}
	txns := g.Transactions()
	for range 100 {
		if _, err := g.Admit(context.Background(), p, 0); !errors.Is(err, errDegraded) {
			t.Fatalf("degraded admission: %v", err)
		}
	}
	if g.Transactions() != txns { // Run's probes count as HealthReads
		t.Fatal("refusals while degraded went to etcd")
	}

	if up := await(t, health, "the outage to be noticed"); up {
		t.Fatal("first health change was up")
	}
	probes := g.HealthReads()
	proxy.SetDown(false)
	// Run's probe notices by itself.
	if up := await(t, health, "recovery after etcd returned"); !up {
		t.Fatal("health went down again")
	}
	if g.HealthReads() == probes {
		t.Fatal("recovered without a counted health read")
	}
	if ok, why := g.Healthy(); !ok {
		t.Fatalf("still degraded after recovery: %s", why)
	}
	if _, err := g.Admit(context.Background(), p, 0); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
	if c := counter(t, g.cli, p, rpm, clk.Now()); c > 1000 || c < 51+held {
		t.Fatalf("counter %d; admitted %d", c, 51+held)
	}
}

// A request never waits for etcd past its own deadline, even while a
// grant for its key hangs on an unreachable etcd.
func TestWaitIsBoundedByContext(t *testing.T) {
	clk := newClock()
	proxy := etcdtest.NewProxy(t)
	g := cluster{n: 1, clk: clk, endpoints: map[int][]string{0: proxy.Endpoints()},
		tune: func(_ int, c *Config) { c.GrantTimeout = time.Hour; c.ShutdownTimeout = 100 * time.Millisecond }}.start(t)[0]
	p := principal(10, 0)
	proxy.SetDown(true)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := g.Admit(ctx, p, 0)
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("admit: %v, want ErrUnavailable and the deadline", err)
	}
	ks := g.state(p)
	ks.mu.Lock()
	pending := ks.rpm.call != nil
	ks.mu.Unlock()
	if !pending {
		t.Fatal("the grant finished; the test proves nothing")
	}
}

// A gateway killed while holding a slice never causes over-admission: its
// slice stays counted as granted, so the others, hammering concurrently,
// get the rest and no more. The loss is exactly the slice it held.
func TestKilledGatewayLosesOnlyItsSlice(t *testing.T) {
	const limit = 500
	clk := newClock()
	// The first gateway reaches etcd through a proxy, so that it can be
	// cut off as a crash would cut it.
	proxy := etcdtest.NewProxy(t)
	gws := cluster{n: 3, clk: clk, endpoints: map[int][]string{0: proxy.Endpoints()}, tune: func(i int, c *Config) {
		if i == 0 {
			c.ShutdownTimeout = 100 * time.Millisecond
		}
	}}.start(t)
	p := principal(limit, 0)
	dead := gws[0]
	const deadAdmitted = 40
	for range deadAdmitted {
		if _, err := dead.Admit(context.Background(), p, 0); err != nil {
			t.Fatal(err)
		}
	}
	dead.quiesce(t)
	lost := dead.held(p, rpm)
	if lost == 0 {
		t.Fatal("the gateway holds nothing; the test proves nothing")
	}
	// A crash: etcd is gone for the gateway before it stops, so nothing
	// it holds goes back. (Closing its etcd client under the running
	// limiter instead raced with the client's own watch bookkeeping.)
	proxy.SetDown(true)
	dead.stop()

	others := sum(hammer(t, gws[1:], 8, p))
	if total := deadAdmitted + others; total+lost != limit {
		t.Fatalf("admitted %d (dead %d + others %d), lost slice %d: want admitted + lost == %d", total, deadAdmitted, others, lost, limit)
	}
	if c := counter(t, gws[1].cli, p, rpm, clk.Now()); c != limit {
		t.Fatalf("counter %d", c)
	}
	t.Logf("the dead gateway admitted %d and took %d unused with it; the others admitted %d", deadAdmitted, lost, others)
}

// A charge of a window's counter that fails (etcd unreachable) is tried
// again: left undone, the counter would stay below the key's usage and
// the day would admit more than its limit.
func TestSettleWindowRetriesACharge(t *testing.T) {
	clk := newClock()
	proxy := etcdtest.NewProxy(t)
	g := cluster{n: 1, clk: clk, endpoints: map[int][]string{0: proxy.Endpoints()},
		tune: func(_ int, c *Config) { c.GrantTimeout = 200 * time.Millisecond }}.start(t)[0]
	p := principal(0, 1000)
	res, err := g.Admit(context.Background(), p, 10)
	if err != nil {
		t.Fatal(err)
	}
	res.Settle(10)
	g.quiesce(t)
	before := counter(t, g.cli, p, tpd, clk.Now())

	retrying := make(chan int, settleAttempts)
	g.settleRetrying = func(attempt int) { retrying <- attempt }
	proxy.SetDown(true)
	_, end, name := window(tpd, clk.Now())
	g.settleWindow(g.state(p), counterRef{key: counterKey(p.TenantID, p.KeyID, tpd, name), end: end}, -50)
	await(t, retrying, "a failed charge tried again")
	proxy.SetDown(false)
	deadline := time.Now().Add(10 * time.Second)
	for counter(t, g.cli, p, tpd, clk.Now()) != before+50 {
		if time.Now().After(deadline) {
			t.Fatalf("counter %d, want %d", counter(t, g.cli, p, tpd, clk.Now()), before+50)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
