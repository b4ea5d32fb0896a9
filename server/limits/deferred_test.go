package limits

import (
	"context"
	"testing"
)

// A counter change the watch delivers while this gateway's own operation
// on the counter is in flight waits for the operation to end: the
// operation's answer moves the counter and the units held together, and
// the remaining of the x-ratelimit headers must not show one without the
// other (it went down by a slice without any admission). Here the change
// is another gateway's grant; it is seen at the end of the operation.
func TestCounterChangeWaitsForOwnOperation(t *testing.T) {
	clk := newClock()
	seenCh := make(chan int64, 16)
	gws := cluster{n: 2, clk: clk, tune: func(i int, c *Config) {
		if i == 0 {
			c.observed = func(_ string, val int64) {
				seenCh <- val
			}
		}
	}}.start(t)
	p := principal(100, 0)
	ctx := context.Background()
	if _, err := gws[0].Admit(ctx, p, 0); err != nil {
		t.Fatal(err)
	}
	for await(t, seenCh, "gw0's own grant") == 0 {
	}
	ks := gws[0].state(p)
	b := ks.bucket(rpm)
	if err := b.acquire(ctx); err != nil { // gw0's operation in flight
		t.Fatal(err)
	}
	before := gws[0].Peek(p).RemainingRequests
	if _, err := gws[1].Admit(ctx, p, 0); err != nil {
		t.Fatal(err)
	}
	// gw0's watch may still deliver its own earlier changes: wait for
	// gw1's grant itself.
	after := counter(t, gws[1].cli, p, rpm, clk.Now())
	for await(t, seenCh, "gw1's grant to reach gw0's watch") < after {
	}
	if got := gws[0].Peek(p).RemainingRequests; got != before {
		t.Errorf("remaining %d while the operation runs, want %d as before it", got, before)
	}
	b.release(ks)
	ks.mu.Lock()
	val := b.ref.val
	ks.mu.Unlock()
	if val < after { // more may have come since (prefetches)
		t.Errorf("counter seen as %d after the operation, want at least %d", val, after)
	}
	if got := gws[0].Peek(p).RemainingRequests; got >= before {
		t.Errorf("remaining %d after the operation, want below %d: gw1's grant", got, before)
	}
}
