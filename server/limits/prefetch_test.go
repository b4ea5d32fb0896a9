package limits

import (
	"context"
	"testing"
)

// A prefetch never takes the window's last units: below FairShare units
// left, they go one at a time to requests that ask. Before, a gateway
// whose client had just stopped could prefetch one of them and hold it
// until the idle sweep, while another gateway's requests were refused.
func TestPrefetchLeavesTheLastUnits(t *testing.T) {
	const limit = 4 // = FairShare: after the first grant, 3 are left
	gws := startGateways(t, 2, newClock())
	p := principal(limit, 0)
	a, b := gws[0], gws[1]
	if _, err := a.Admit(context.Background(), p, 0); err != nil {
		t.Fatal(err)
	}
	a.quiesce(t) // its prefetch, if any, is done
	if h := a.held(p, rpm); h != 0 {
		t.Fatalf("the gateway whose requests stopped holds %d of the window's last %d units", h, limit-1)
	}
	for i := range limit - 1 {
		if _, err := b.Admit(context.Background(), p, 0); err != nil {
			t.Fatalf("request %d of the other gateway: %v", i+1, err)
		}
	}
	if _, err := b.Admit(context.Background(), p, 0); !isDenied(err, ReasonRPM) {
		t.Fatalf("request past the limit: %v", err)
	}
}
