package log

import (
	"context"
	"testing"
	"time"
)

// TestRunTicks drives the publisher with hand-sent ticks: an unbuffered
// send returns once the loop took the tick, so the second send returns only
// after the first round finished; no sleeping. A round may still be running
// while the test goes on, so the checks hold whatever rounds ran.
func TestRunTicks(t *testing.T) {
	e := newEnv(t, Options{})
	ticks := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.log.RunTicks(ctx, ticks) }()

	e.mustAppend(t, event(1, "acme"))
	ticks <- time.Time{}
	ticks <- time.Time{} // the round of the first tick is over
	latest, err := e.log.Head("acme", "2026-03-01")
	if err != nil || latest.EventCount != 1 {
		t.Fatalf("head after a tick: %+v, %v", latest, err)
	}

	e.mustAppend(t, event(2, "acme"))
	e.clock.Set(time.Date(2026, 3, 2, 0, 0, 5, 0, time.UTC))
	cancel() // the last round runs on the way out
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	heads, _ := e.log.Heads("acme", "2026-03-01")
	final := heads[len(heads)-1]
	if !final.Final() || final.EventCount != 2 {
		t.Fatalf("last head after the day closed: %+v", final)
	}
	for _, h := range heads[:len(heads)-1] {
		if h.Final() {
			t.Fatalf("two final heads: %+v", heads)
		}
	}
}
