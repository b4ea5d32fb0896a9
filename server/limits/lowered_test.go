package limits

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/server/keys"
)

// heldAfter admits requests of p (reserving reserve tokens each) until the
// gateway, quiet again, holds units of kind k; it returns how many it
// admitted.
func heldAfter(t *testing.T, g *gateway, p *keys.Principal, k kind, reserve int64) int64 {
	t.Helper()
	for n := int64(1); n <= 50; n++ {
		r, err := g.Admit(context.Background(), p, reserve)
		if err != nil {
			t.Fatal(err)
		}
		r.Settle(reserve)
		g.quiesce(t)
		if g.held(p, k) > 0 {
			return n
		}
	}
	t.Fatal("the gateway never held units of the key")
	return 0
}

// A key's RPM lowered mid-minute below what the minute already admitted:
// the units the gateway holds were granted under the old limit, so none
// is admitted; they go back to etcd, and the next minute admits exactly
// the new limit.
func TestLoweredRPMAdmitsNothingPastIt(t *testing.T) {
	clk := newClock()
	g := startGateways(t, 1, clk)[0]
	ctx := context.Background()
	admitted := heldAfter(t, g, principal(100, 0), rpm, 0)
	for admitted < 20 {
		if _, err := g.Admit(ctx, principal(100, 0), 0); err != nil {
			t.Fatal(err)
		}
		admitted++
	}
	g.quiesce(t)
	lowered := principal(5, 0)
	for i := range 10 {
		if _, err := g.Admit(ctx, lowered, 0); !isDenied(err, ReasonRPM) {
			t.Fatalf("request %d after RPM fell to 5 with %d admitted this minute: %v", i, admitted, err)
		}
	}
	g.quiesce(t)
	if h := g.held(lowered, rpm); h != 0 {
		t.Fatalf("still holds %d units granted under the old limit", h)
	}
	if c := counter(t, g.cli, lowered, rpm, clk.Now()); c != admitted {
		t.Fatalf("counter %d, want the %d admitted: the held units go back", c, admitted)
	}
	clk.Advance(time.Minute)
	for i := range 5 {
		if _, err := g.Admit(ctx, lowered, 0); err != nil {
			t.Fatalf("request %d of the next minute: %v", i, err)
		}
	}
	if _, err := g.Admit(ctx, lowered, 0); !isDenied(err, ReasonRPM) {
		t.Fatalf("sixth request of the next minute: %v", err)
	}
}

// TPD lowered while a reservation is in flight: the tokens it does not use
// come back to the gateway's slice when it settles, but they were granted
// under the old limit and the day has already used more than the new one,
// so they are given back, not admitted.
func TestLoweredTPDAdmitsNothingPastIt(t *testing.T) {
	clk := newClock()
	g := startGateways(t, 1, clk)[0]
	ctx := context.Background()
	r, err := g.Admit(ctx, principal(0, 1000), 500)
	if err != nil {
		t.Fatal(err)
	}
	g.quiesce(t)
	lowered := principal(0, 100)
	r.Settle(300) // above the new limit; 200 come back to the slice
	if h := g.held(lowered, tpd); h < 200 {
		t.Fatalf("holds %d tokens after the settle, want at least the 200 unused", h)
	}
	for i := range 3 {
		if _, err := g.Admit(ctx, lowered, 10); !isDenied(err, ReasonTPD) {
			t.Fatalf("request %d after TPD fell to 100 with 300 used today: %v", i, err)
		}
	}
	g.quiesce(t)
	if h := g.held(lowered, tpd); h != 0 {
		t.Fatalf("still holds %d tokens granted under the old limit", h)
	}
	if c := counter(t, g.cli, lowered, tpd, clk.Now()); c != 300 {
		t.Fatalf("counter %d, want the 300 used", c)
	}
}

// Raising a limit gives back what the gateway holds too (the limit may
// have been higher still in between, see below), and the next request is
// admitted from a grant under the raised limit: one round trip per key and
// gateway, once per change. The counter still counts exactly what was
// admitted.
func TestRaisedLimitRegrants(t *testing.T) {
	clk := newClock()
	g := startGateways(t, 1, clk)[0]
	admitted := heldAfter(t, g, principal(100, 0), rpm, 0)
	raised := principal(200, 0)
	txns := g.Transactions()
	if _, err := g.Admit(context.Background(), raised, 0); err != nil {
		t.Fatal(err)
	}
	admitted++
	if n := g.Transactions() - txns; n == 0 {
		t.Fatal("the admission under the raised limit used units granted under the old one")
	}
	g.quiesce(t)
	if c, h := counter(t, g.cli, raised, rpm, clk.Now()), g.held(raised, rpm); c != admitted+h {
		t.Fatalf("counter %d, want the %d admitted and the %d held", c, admitted, h)
	}
}

// A key raised and then lowered, while a gateway held units granted under
// the first limit: the lowered limit is above that one, but the window's
// counter, driven by another gateway under the raised limit, already
// stands past it. The units held are given back, not admitted: a limit
// that changed either way since a grant makes its units suspect.
func TestRaisedThenLoweredAdmitsNothingPastIt(t *testing.T) {
	clk := newClock()
	gws := startGateways(t, 2, clk)
	a, b := gws[0], gws[1]
	ctx := context.Background()
	admitted := heldAfter(t, a, principal(100, 0), rpm, 0)
	a.quiesce(t)
	if a.held(principal(100, 0), rpm) == 0 {
		t.Fatal("gateway A holds no units to test with")
	}
	raised := principal(200, 0)
	byB := int64(0)
	for counter(t, b.cli, raised, rpm, clk.Now()) < 190 {
		if _, err := b.Admit(ctx, raised, 0); err != nil {
			t.Fatalf("B's request %d under 200: %v", byB, err)
		}
		byB++
		b.quiesce(t)
	}
	lowered := principal(150, 0)
	for i := range 20 {
		if _, err := a.Admit(ctx, lowered, 0); !isDenied(err, ReasonRPM) {
			t.Fatalf("A's request %d after the limit went 100 → 200 → 150, %d admitted this minute: %v", i, admitted+byB, err)
		}
	}
	a.quiesce(t)
	if h := a.held(lowered, rpm); h != 0 {
		t.Fatalf("A still holds %d units granted under 100", h)
	}
}
