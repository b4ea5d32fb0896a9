package limits

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/server/keys"
)

// Concurrent streamed and non-streamed requests on three gateways reserve
// prompt + max_tokens and settle with their real usage; streams settle
// late, after other requests were admitted. Throughout, the usage settled
// plus the reservations in flight never exceed what the day's counter
// granted, which never exceeds TPD. Once every gateway has given back what
// it holds, the counter equals the sum of the usage the clients received.
func TestTPDReserveThenSettle(t *testing.T) {
	const limit = 60_000
	clk := newClock()
	gws := startGateways(t, 3, clk)
	p := principal(0, limit)
	var (
		used     atomic.Int64 // tokens the clients were told they used
		inFlight atomic.Int64 // reservations not yet settled
		denied   atomic.Int64
		streams  sync.WaitGroup
		workers  sync.WaitGroup
	)
	// check samples the invariant: settled + in flight ≤ granted ≤ TPD.
	// Reading used before inFlight (and each request moving its tokens
	// from inFlight to used in that order) never counts a request twice.
	check := func(g *gateway) {
		u := used.Load()
		f := inFlight.Load()
		c := counter(t, g.cli, p, tpd, clk.Now())
		if c > limit || u+f > c {
			t.Errorf("settled %d + in flight %d, granted %d, TPD %d", u, f, c, limit)
		}
	}
	for w := range 12 {
		workers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			g := gws[w%3]
			for i := range 120 {
				prompt, maxTokens := int64(rng.IntN(60)+1), int64(rng.IntN(240)+1)
				r, err := g.Admit(context.Background(), p, prompt+maxTokens)
				if isDenied(err, ReasonTPD) {
					denied.Add(1)
					continue
				}
				if err != nil {
					t.Errorf("admit: %v", err)
					return
				}
				inFlight.Add(r.Reserved)
				if i%10 == 0 {
					check(g)
				}
				u := prompt + rng.Int64N(maxTokens+1)
				settle := func() {
					r.Settle(u)
					inFlight.Add(-r.Reserved)
					used.Add(u)
				}
				if rng.IntN(2) == 0 {
					streams.Go(settle) // a stream settles at its end, later
				} else {
					settle()
				}
			}
		})
	}
	workers.Wait()
	streams.Wait()
	check(gws[0])
	for _, g := range gws {
		g.stop()
	}
	got := counter(t, gws[0].cli, p, tpd, clk.Now())
	if got != used.Load() {
		t.Fatalf("day counter %d, sum of usage received %d", got, used.Load())
	}
	if got > limit {
		t.Fatalf("charged %d > TPD %d", got, limit)
	}
	if denied.Load() == 0 {
		t.Fatal("demand never exceeded the budget; the test proves nothing")
	}
	t.Logf("charged %d of %d, %d refused", got, limit, denied.Load())
}

// A reservation that does not fit in what remains of the day is refused
// (429 tpd), not admitted on credit, and the refused request is charged
// nothing, not even its RPM unit.
func TestTPDReservationMustFit(t *testing.T) {
	clk := newClock()
	g := startGateways(t, 1, clk)[0]
	p := principal(100, 1000)
	r, err := g.Admit(context.Background(), p, 900)
	if err != nil {
		t.Fatal(err)
	}
	before := g.Peek(p)
	_, err = g.Admit(context.Background(), p, 200)
	if !isDenied(err, ReasonTPD) {
		t.Fatalf("reservation over the remaining budget: %v", err)
	}
	if after := g.Peek(p); after.RemainingRequests != before.RemainingRequests || after.RemainingTokens != 100 {
		t.Fatalf("refusal charged something: before %+v, after %+v", before, after)
	}
	r.Settle(100) // 800 come back
	r2, err := g.Admit(context.Background(), p, 200)
	if err != nil {
		t.Fatalf("after settling, 900 remain: %v", err)
	}
	if s := r2.State(); s.RemainingTokens != 700 || s.RemainingRequests != 98 {
		t.Fatalf("state %+v, want 700 tokens and 98 requests left", s)
	}
	r2.Settle(150)
	g.stop()
	if c := counter(t, g.cli, p, tpd, clk.Now()); c != 250 {
		t.Fatalf("counter %d, want the 250 used", c)
	}
}

// Usage above the reservation is charged whatever the limit, in the
// background, without blocking Settle; the key then has nothing left.
func TestTPDOverrunIsCharged(t *testing.T) {
	clk := newClock()
	g := startGateways(t, 1, clk)[0]
	p := principal(0, 1000)
	r, err := g.Admit(context.Background(), p, 100)
	if err != nil {
		t.Fatal(err)
	}
	r.Settle(1500)
	g.quiesce(t)
	if c := counter(t, g.cli, p, tpd, clk.Now()); c != 1500 {
		t.Fatalf("counter %d after an overrun to 1500", c)
	}
	if _, err := g.Admit(context.Background(), p, 1); !isDenied(err, ReasonTPD) {
		t.Fatalf("after the overrun: %v", err)
	}
	if s := g.Peek(p); s.RemainingTokens != 0 {
		t.Fatalf("state %+v", s)
	}
	g.stop()
	if c := counter(t, g.cli, p, tpd, clk.Now()); c != 1500 {
		t.Fatalf("counter %d after shutdown", c)
	}
}

// A request admitted before midnight UTC and settled after it settles
// against its own day; the new day starts from a fresh budget, and each
// day's counter ends equal to its usage.
func TestTPDSettleAcrossMidnight(t *testing.T) {
	clk := newClock()
	clk.Set(time.Date(2026, 11, 23, 23, 59, 50, 0, time.UTC))
	day1 := clk.Now()
	g := startGateways(t, 1, clk)[0]
	p := principal(0, 10_000)
	late, err := g.Admit(context.Background(), p, 4000)
	if err != nil {
		t.Fatal(err)
	}
	r, err := g.Admit(context.Background(), p, 1000)
	if err != nil {
		t.Fatal(err)
	}
	r.Settle(300)

	clk.Set(time.Date(2026, 11, 24, 0, 0, 10, 0, time.UTC))
	day2 := clk.Now()
	r2, err := g.Admit(context.Background(), p, 9000)
	if err != nil {
		t.Fatalf("a new day's budget: %v", err)
	}
	if s := r2.State(); s.ResetTokens != 24*time.Hour-10*time.Second {
		t.Fatalf("reset %v", s.ResetTokens)
	}
	late.Settle(2500) // the stream that started yesterday ends today
	r2.Settle(8000)
	g.stop()
	if c := counter(t, g.cli, p, tpd, day1); c != 2800 {
		t.Fatalf("day 1 counter %d, want 300 + 2500", c)
	}
	if c := counter(t, g.cli, p, tpd, day2); c != 8000 {
		t.Fatalf("day 2 counter %d, want 8000", c)
	}
}

// A negative reservation is a caller's bug, never a free admission: it is
// refused with ErrNegativeReservation, whatever the key's limits, and
// charges nothing.
func TestAdmitRefusesNegativeReservation(t *testing.T) {
	clk := newClock()
	g := startGateways(t, 1, clk)[0]
	for _, p := range []*keys.Principal{principal(100, 1000), principal(0, 1000), principal(100, 0), principal(0, 0)} {
		before := g.Peek(p)
		for _, n := range []int64{-1, math.MinInt64} {
			if _, err := g.Admit(context.Background(), p, n); !errors.Is(err, ErrNegativeReservation) {
				t.Fatalf("rpm %d tpd %d: Admit(%d) = %v, want ErrNegativeReservation", p.RPM, p.TPD, n, err)
			}
		}
		if after := g.Peek(p); after != before {
			t.Fatalf("refusal charged something: before %+v, after %+v", before, after)
		}
	}
}

// A reservation larger than the whole TPD can never fit: it is refused
// (429 tpd) at once, up to the largest int64, also while the gateway
// holds a debt, and charges nothing.
func TestTPDReservationOverTheDay(t *testing.T) {
	clk := newClock()
	g := startGateways(t, 1, clk)[0]
	p := principal(100, 1000)
	r, err := g.Admit(context.Background(), p, 10)
	if err != nil {
		t.Fatal(err)
	}
	before := g.Peek(p)
	for _, n := range []int64{1001, math.MaxInt64 - 1, math.MaxInt64} {
		if _, err := g.Admit(context.Background(), p, n); !isDenied(err, ReasonTPD) {
			t.Fatalf("Admit(%d) = %v, want a tpd denial", n, err)
		}
	}
	r.Settle(5000) // an overrun: the gateway owes etcd until it is charged
	if _, err := g.Admit(context.Background(), p, math.MaxInt64); !isDenied(err, ReasonTPD) {
		t.Fatalf("Admit(MaxInt64) with a debt = %v, want a tpd denial", err)
	}
	if after := g.Peek(p); after.RemainingRequests != before.RemainingRequests {
		t.Fatalf("refusals charged requests: before %+v, after %+v", before, after)
	}
	g.stop()
	if c := counter(t, g.cli, p, tpd, clk.Now()); c != 5000 {
		t.Fatalf("counter %d, want the 5000 used", c)
	}
}
