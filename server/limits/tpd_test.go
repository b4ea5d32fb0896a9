package limits

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// Concurrent requests reserve prompt + max_tokens and settle with their real
// usage (streamed requests settle late, after others were admitted). At any
// time the tokens granted never exceed TPD, so charged usage stays within
// TPD plus in-flight reservations; once every gateway has given back what
// it holds, the day's counter equals the sum of the usage clients received.
func TestTPDReserveThenSettle(t *testing.T) {
	clk := newClock()
	gws := startGateways(t, 3, clk)
	const limit = 50_000
	p := principal(0, limit)
	var (
		used     atomic.Int64 // tokens the clients were told they used
		inFlight atomic.Int64 // reservations not yet settled
		denied   atomic.Int64
		maxSeen  atomic.Int64
	)
	var wg sync.WaitGroup
	for w := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			g := gws[w%3]
			for range 150 {
				prompt, maxTokens := int64(rng.IntN(50)+1), int64(rng.IntN(200)+1)
				r, err := g.Admit(context.Background(), p, prompt+maxTokens)
				var d *Denied
				if errors.As(err, &d) {
					denied.Add(1)
					continue
				}
				if err != nil {
					t.Errorf("admit: %v", err)
					return
				}
				inFlight.Add(r.Reserved)
				// Charged so far can never pass what was granted: check
				// the invariant while requests are in flight.
				if c := counter(t, g.cli, p, tpd, clk.Now()); c > limit {
					t.Errorf("granted %d > TPD %d", c, limit)
				} else if c > maxSeen.Load() {
					maxSeen.Store(c)
				}
				streamed := rng.IntN(2) == 0
				u := prompt + int64(rng.IntN(int(maxTokens)+1))
				if streamed {
					// A stream settles after more requests were admitted.
					go func() { r.Settle(u); used.Add(u); inFlight.Add(-r.Reserved) }()
					continue
				}
				r.Settle(u)
				used.Add(u)
				inFlight.Add(-r.Reserved)
			}
		}()
	}
	wg.Wait()
	waitSettled(t, &inFlight) // streamed settlements run in goroutines
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
		t.Fatalf("demand never exceeded the budget; the test proves nothing")
	}
	t.Logf("charged %d of %d, %d denied, peak granted %d", got, limit, denied.Load(), maxSeen.Load())
}

// A reservation that does not fit in what remains of the day is refused
// (429 tpd), not admitted on credit.
func TestTPDReservationMustFit(t *testing.T) {
	clk := newClock()
	g := startGateways(t, 1, clk)[0]
	p := principal(0, 1000)
	r, err := g.Admit(context.Background(), p, 900)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Admit(context.Background(), p, 200); !isDenied(err, "tpd") {
		t.Fatalf("reservation over the remaining budget: %v", err)
	}
	r.Settle(100) // 800 come back
	if _, err := g.Admit(context.Background(), p, 200); err != nil {
		t.Fatalf("after settling, 900 remain: %v", err)
	}
}

func isDenied(err error, limit string) bool {
	var d *Denied
	return errors.As(err, &d) && d.Limit == limit
}
