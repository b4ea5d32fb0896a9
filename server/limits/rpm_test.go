package limits

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Three gateways hammer one key from many goroutines within one window:
// exactly RPM requests are admitted, never more, whatever the interleaving.
func TestRPMExactAcrossThreeGateways(t *testing.T) {
	for _, limit := range []int64{1, 7, 100, 1000} {
		t.Run(time.Duration(limit).String(), func(t *testing.T) {
			clk := newClock()
			gws := startGateways(t, 3, clk)
			p := principal(limit, 0)
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for w := range 24 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					g := gws[w%3]
					for {
						_, err := g.Admit(context.Background(), p, 0)
						var d *Denied
						if errors.As(err, &d) {
							return // this gateway can get nothing more in the window
						}
						if err != nil {
							t.Errorf("admit: %v", err)
							return
						}
						admitted.Add(1)
					}
				}()
			}
			wg.Wait()
			if got := admitted.Load(); got != limit {
				t.Fatalf("admitted %d with RPM %d", got, limit)
			}
			if got := counter(t, gws[0].cli, p, rpm, clk.Now()); got != limit {
				t.Fatalf("counter %d, want %d", got, limit)
			}
		})
	}
}

// Across window boundaries, each UTC minute admits at most RPM, and a new
// minute starts from a fresh budget.
func TestRPMEveryWindow(t *testing.T) {
	clk := newClock()
	gws := startGateways(t, 3, clk)
	p := principal(50, 0)
	start := clk.Now().Truncate(time.Minute)
	for minute := range 3 {
		clk.Set(start.Add(time.Duration(minute)*time.Minute + 10*time.Second))
		admitted := 0
		for i := range 200 {
			if _, err := gws[i%3].Admit(context.Background(), p, 0); err == nil {
				admitted++
			}
		}
		if admitted != 50 {
			t.Fatalf("minute %d: admitted %d, want exactly 50", minute, admitted)
		}
	}
}

// A denial carries the headers' state and a Retry-After up to the window's
// end; admissions count the remaining requests down.
func TestRPMDeniedAndRemaining(t *testing.T) {
	clk := newClock()
	g := startGateways(t, 1, clk)[0]
	p := principal(3, 0)
	var last int64 = 4
	for range 3 {
		r, err := g.Admit(context.Background(), p, 0)
		if err != nil {
			t.Fatal(err)
		}
		if rem := r.State().RemainingRequests; rem >= last {
			t.Fatalf("remaining %d did not go down from %d", rem, last)
		} else {
			last = rem
		}
	}
	_, err := g.Admit(context.Background(), p, 0)
	var d *Denied
	if !errors.As(err, &d) || d.Limit != "rpm" {
		t.Fatalf("fourth request: %v", err)
	}
	if want := 55 * time.Second; d.RetryAfter != want || d.State.RemainingRequests != 0 {
		t.Fatalf("denied %+v, want RetryAfter %v", d, want)
	}
}

// An idle gateway gives its slice back, so a busy one can use the whole
// budget: no under-admission beyond what idle slices hold.
func TestIdleSliceGoesBack(t *testing.T) {
	clk := newClock()
	gws := startGateways(t, 2, clk)
	p := principal(100, 0)
	// Gateway 0 takes slices, then goes idle.
	for range 30 {
		if _, err := gws[0].Admit(context.Background(), p, 0); err != nil {
			t.Fatal(err)
		}
	}
	clk.Set(clk.Now().Add(2 * idleAfter))
	deadline := time.Now().Add(10 * time.Second)
	for counter(t, gws[0].cli, p, rpm, clk.Now()) != 30 {
		if time.Now().After(deadline) {
			t.Fatalf("idle gateway kept its slice: counter %d", counter(t, gws[0].cli, p, rpm, clk.Now()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	n := 0
	for {
		if _, err := gws[1].Admit(context.Background(), p, 0); err != nil {
			break
		}
		n++
	}
	if n != 70 {
		t.Fatalf("busy gateway admitted %d, want the 70 left", n)
	}
}
