package limits

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/server/keys"
)

// hammer runs workers goroutines per gateway against key p until each has
// been refused once by the RPM limit; it returns the admissions per
// gateway.
func hammer(t *testing.T, gws []*gateway, workers int, p *keys.Principal) []int64 {
	t.Helper()
	admitted := make([]atomic.Int64, len(gws))
	var wg sync.WaitGroup
	for i, g := range gws {
		for range workers {
			wg.Go(func() {
				for {
					_, err := g.Admit(context.Background(), p, 0)
					if isDenied(err, ReasonRPM) {
						return
					}
					if err != nil {
						t.Errorf("gateway %d: %v", i, err)
						return
					}
					admitted[i].Add(1)
				}
			})
		}
	}
	wg.Wait()
	out := make([]int64, len(gws))
	for i := range admitted {
		out[i] = admitted[i].Load()
	}
	return out
}

func sum(xs []int64) (s int64) {
	for _, x := range xs {
		s += x
	}
	return s
}

// Three gateways, each with its own etcd client, hammer one key from
// eight goroutines each within one window: exactly RPM requests are
// admitted, never more, whatever the interleaving, and every unit granted
// was used.
func TestRPMExactAcrossThreeGateways(t *testing.T) {
	for _, limit := range []int64{1, 2, 7, 100, 1000, 5000} {
		t.Run(strconv.FormatInt(limit, 10), func(t *testing.T) {
			clk := newClock()
			gws := startGateways(t, 3, clk)
			p := principal(limit, 0)
			per := hammer(t, gws, 8, p)
			if got := sum(per); got != limit {
				t.Fatalf("admitted %d (%v) with RPM %d", got, per, limit)
			}
			if got := counter(t, gws[0].cli, p, rpm, clk.Now()); got != limit {
				t.Fatalf("counter %d, want %d", got, limit)
			}
			for i, g := range gws {
				g.quiesce(t)
				if h := g.held(p, rpm); h != 0 {
					t.Fatalf("gateway %d still holds %d after the key was exhausted", i, h)
				}
			}
			t.Logf("RPM %d: admitted per gateway %v", limit, per)
		})
	}
}

// While gateways hammer a key and time moves through several minutes (so
// windows roll over mid-flight and idle slices go back), no UTC minute
// ever admits more than RPM, and none admits more than its counter says
// was granted.
func TestRPMNeverExceededInAnyWindow(t *testing.T) {
	const limit = 40
	clk := newClock()
	gws := startGateways(t, 3, clk)
	p := principal(limit, 0)
	var (
		mu       sync.Mutex
		byWindow = map[time.Time]int64{}
		attempts atomic.Int64
		wg       sync.WaitGroup
	)
	for i, g := range gws {
		for range 6 {
			wg.Go(func() {
				for range 250 {
					if attempts.Add(1)%97 == 0 {
						clk.Advance(7 * time.Second) // about 8 steps per minute
					}
					r, err := g.Admit(context.Background(), p, 0)
					if isDenied(err, ReasonRPM) {
						continue
					}
					if err != nil {
						t.Errorf("gateway %d: %v", i, err)
						return
					}
					mu.Lock()
					byWindow[r.rpmEnd]++
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if len(byWindow) < 3 {
		t.Fatalf("only %d windows saw admissions; the test should span several", len(byWindow))
	}
	full := 0
	for end, n := range byWindow {
		c := counter(t, gws[0].cli, p, rpm, end.Add(-time.Second))
		if n > limit || n > c {
			t.Errorf("window ending %s admitted %d; RPM %d, counter %d", end.Format(time.TimeOnly), n, limit, c)
		}
		if n == limit {
			full++
		}
	}
	t.Logf("%d windows, %d admitted exactly RPM: %v", len(byWindow), full, byWindow)
}

// An idle gateway's slice is what others cannot use until it goes back:
// with one gateway holding a slice and silent, the others admit exactly
// RPM minus that slice (the documented under-admission bound). Once the
// slice has been idle for IdleAfter it goes back, the others see it
// through their watch (long before Recheck) and get it.
func TestRPMIdleSliceBound(t *testing.T) {
	const limit = 300
	clk := newClock()
	returned := make(chan int, 8) // busy gateways that saw the slice come back
	var target atomic.Int64
	target.Store(-1)
	gws := cluster{n: 3, clk: clk, tune: func(i int, c *Config) {
		if i > 0 {
			c.observed = func(_ string, val int64) {
				if val == target.Load() {
					select {
					case returned <- i:
					default:
					}
				}
			}
		}
	}}.start(t)
	p := principal(limit, 0)
	idle := gws[0]
	for range 20 {
		if _, err := idle.Admit(context.Background(), p, 0); err != nil {
			t.Fatal(err)
		}
	}
	idle.quiesce(t)
	heldIdle := idle.held(p, rpm)
	if heldIdle == 0 {
		t.Fatal("the idle gateway holds nothing; the test proves nothing")
	}
	busy := hammer(t, gws[1:], 4, p)
	if got := 20 + sum(busy); got != limit-heldIdle {
		t.Fatalf("admitted %d, want RPM %d minus the idle slice %d", got, limit, heldIdle)
	}

	target.Store(limit - heldIdle)
	clk.Advance(idle.cfg.IdleAfter + time.Millisecond) // < Recheck
	idle.sweep(context.Background(), true)
	if h := idle.held(p, rpm); h != 0 {
		t.Fatalf("the idle gateway still holds %d", h)
	}
	for range 2 {
		await(t, returned, "a busy gateway's watch to see the slice come back")
	}
	if more := hammer(t, gws[1:], 4, p); sum(more) != heldIdle {
		t.Fatalf("after the idle slice went back the others admitted %d more, want %d", sum(more), heldIdle)
	}
	t.Logf("idle slice %d of RPM %d", heldIdle, limit)
}

// Each admission counts the remaining requests down; the refusal carries
// the reason, the state and a Retry-After to the minute's end.
func TestRPMDeniedStateAndHeaders(t *testing.T) {
	clk := newClock() // 10:00:05
	g := startGateways(t, 1, clk)[0]
	p := principal(3, 0)
	for want := int64(2); want >= 0; want-- {
		r, err := g.Admit(context.Background(), p, 0)
		if err != nil {
			t.Fatal(err)
		}
		if s := r.State(); s.RemainingRequests != want || s.LimitRequests != 3 || s.ResetRequests != 55*time.Second {
			t.Fatalf("state %+v, want %d remaining, reset 55s", s, want)
		}
	}
	_, err := g.Admit(context.Background(), p, 0)
	var d *Denied
	if !errors.As(err, &d) || d.Reason != ReasonRPM {
		t.Fatalf("fourth request: %v", err)
	}
	if d.RetryAfter != 55*time.Second || d.State.RemainingRequests != 0 {
		t.Fatalf("denied %+v", d)
	}
	h := http.Header{}
	d.SetHeaders(h)
	want := map[string]string{
		"Retry-After":                    "55",
		"X-Ratelimit-Limit-Requests":     "3",
		"X-Ratelimit-Remaining-Requests": "0",
		"X-Ratelimit-Reset-Requests":     "55s",
	}
	for k, v := range want {
		if h.Get(k) != v {
			t.Errorf("%s = %q, want %q", k, h.Get(k), v)
		}
	}
	if len(h) != len(want) {
		t.Errorf("headers %v: the tokens trio must be absent without a TPD limit", h)
	}
	if s := g.Peek(p); s.RemainingRequests != 0 {
		t.Fatalf("peek %+v", s)
	}
}

// Once etcd showed the window exhausted, refusals come from memory: a
// flood of refused requests costs no etcd traffic until Recheck passes.
func TestRefusalsCostNoEtcd(t *testing.T) {
	clk := newClock()
	g := startGateways(t, 1, clk)[0]
	p := principal(5, 0)
	for range 5 {
		if _, err := g.Admit(context.Background(), p, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.Admit(context.Background(), p, 0); !isDenied(err, ReasonRPM) {
		t.Fatalf("sixth: %v", err)
	}
	g.quiesce(t)
	before := g.Transactions()
	for range 1000 {
		if _, err := g.Admit(context.Background(), p, 0); !isDenied(err, ReasonRPM) {
			t.Fatalf("refused request: %v", err)
		}
	}
	if after := g.Transactions(); after != before {
		t.Fatalf("1000 refusals made %d etcd round trips", after-before)
	}
	clk.Advance(g.cfg.Recheck)
	if _, err := g.Admit(context.Background(), p, 0); !isDenied(err, ReasonRPM) {
		t.Fatalf("after Recheck: %v", err)
	}
	if g.Transactions() == before {
		t.Fatal("no recheck of etcd after Recheck passed")
	}
}

// A key without limits costs nothing: no state, no etcd, no allocation,
// no headers.
func TestUnlimitedKeyIsFree(t *testing.T) {
	g := startGateways(t, 1, newClock())[0]
	p := principal(0, 0)
	txns := g.Transactions()
	allocs := testing.AllocsPerRun(1000, func() {
		r, err := g.Admit(context.Background(), p, 100)
		if err != nil {
			t.Fatal(err)
		}
		r.Settle(50)
		g.Peek(p).SetHeaders(nil)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per request", allocs)
	}
	n := 0
	g.keys.Range(func(_, _ any) bool { n++; return true })
	if n != 0 || g.Transactions() != txns {
		t.Fatalf("%d keys tracked, %d etcd round trips", n, g.Transactions()-txns)
	}
}

// The hit path (admit and settle from held slices) does not allocate.
// The measured calls must trigger no grant: a prefetch allocates in the
// etcd client, in the background, and would show in the process-wide
// count. So the warm-up goes on until the slices have room for them.
func TestAdmitHitDoesNotAllocate(t *testing.T) {
	const (
		runs          = 200
		reserve, used = 10, 8
	)
	g := startGateways(t, 1, newClock())[0]
	p := principal(1<<40, 1<<50)
	admit := func() {
		r, err := g.Admit(context.Background(), p, reserve)
		if err != nil {
			t.Fatal(err)
		}
		r.Settle(used)
	}
	// room is how many admissions the slices take before a prefetch: one
	// starts when, just after an admission's take, a slice is down to
	// 1/PrefetchBelow of its size. A take holds reserve tokens; Settle
	// gives back all but used.
	room := func() int64 {
		ks := g.state(p)
		ks.mu.Lock()
		defer ks.mu.Unlock()
		below := g.cfg.PrefetchBelow
		return min(ks.rpm.local-ks.rpm.lastSlice/below-1,
			(ks.tpd.local-ks.tpd.lastSlice/below-reserve)/used)
	}
	for range 5000 {
		admit()
	}
	for g.quiesce(t); room() <= runs+10; g.quiesce(t) {
		admit()
	}
	txns := g.Transactions()
	allocs := testing.AllocsPerRun(runs, admit)
	if g.Transactions() != txns {
		t.Fatal("a grant ran during the measurement")
	}
	if allocs != 0 {
		t.Fatalf("%v allocations per admission", allocs)
	}
}
