package limits

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/etcdtest"
)

// With etcd unreachable a gateway admits only from the slice it holds, then
// refuses with ErrUnavailable (never unlimited, never per-process limits),
// reports itself degraded, and recovers by itself when etcd returns.
func TestEtcdOutage(t *testing.T) {
	clk := newClock()
	proxy := etcdtest.NewProxy(t)
	g := startGateways(t, 1, clk, proxy.Endpoints())[0]
	p := principal(1000, 0)

	// Build up a rate so the gateway holds a slice of some size.
	for range 50 {
		if _, err := g.Admit(context.Background(), p, 0); err != nil {
			t.Fatal(err)
		}
	}
	g.Limiter.keys.Range(func(_, v any) bool { // let a prefetch land
		ks := v.(*keyState)
		ks.grantMu.Lock()
		ks.grantMu.Unlock()
		return true
	})
	ks := g.state(p)
	ks.mu.Lock()
	held := ks.rpm.local
	ks.mu.Unlock()

	proxy.SetDown(true)
	admitted := int64(0)
	var err error
	for range 10_000 {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err = g.Admit(ctx, p, 0)
		cancel()
		if err != nil {
			break
		}
		admitted++
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("after %d admissions during the outage: %v, want ErrUnavailable", admitted, err)
	}
	if admitted != held {
		t.Fatalf("admitted %d during the outage, but held %d", admitted, held)
	}
	if ok, why := g.Healthy(); ok {
		t.Fatalf("healthy during the outage (%s)", why)
	}

	proxy.SetDown(false)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := g.Admit(ctx, p, 0)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery after etcd returned: %v", err)
		}
	}
	if ok, why := g.Healthy(); !ok {
		t.Fatalf("still degraded after recovery: %s", why)
	}
	if got := counter(t, g.cli, p, rpm, clk.Now()); got > 1000 {
		t.Fatalf("counter %d over the limit", got)
	}
}

// A gateway killed while holding a slice never causes over-admission: its
// slice stays counted as granted, so the others get the rest and no more.
// The loss is bounded by the slice it held.
func TestKilledGatewayLosesOnlyItsSlice(t *testing.T) {
	clk := newClock()
	gws := startGateways(t, 3, clk)
	p := principal(500, 0)
	dead := gws[0]
	deadAdmitted := int64(0)
	for range 40 {
		if _, err := dead.Admit(context.Background(), p, 0); err != nil {
			t.Fatal(err)
		}
		deadAdmitted++
	}
	// Kill it: its etcd client goes away without Run giving anything back.
	ks := dead.state(p)
	ks.grantMu.Lock() // no prefetch in flight
	ks.mu.Lock()
	lost := ks.rpm.local
	ks.mu.Unlock()
	_ = dead.cli.Close()
	ks.grantMu.Unlock()

	others := int64(0)
	for i := 0; ; i++ {
		_, err := gws[1+i%2].Admit(context.Background(), p, 0)
		if isDenied(err, "rpm") {
			// both survivors are exhausted once each has been denied
			if _, err2 := gws[1+(i+1)%2].Admit(context.Background(), p, 0); isDenied(err2, "rpm") {
				break
			} else if err2 == nil {
				others++
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		others++
	}
	if total := deadAdmitted + others; total+lost != 500 || total > 500 {
		t.Fatalf("admitted %d (dead %d + others %d), lost slice %d: want admitted + lost == 500", total, deadAdmitted, others, lost)
	}
	t.Logf("dead gateway admitted %d and took %d unused to its grave; the others admitted %d", deadAdmitted, lost, others)
}
