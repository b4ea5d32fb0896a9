package limits

import (
	"context"
	"strconv"
	"testing"
)

// A prefetch never leaves the window fewer than FairShare requests: those
// go one at a time to requests that ask. Before, a gateway
// whose client had just stopped could prefetch one of them and hold it
// until the idle sweep, while another gateway's requests were refused.
func TestPrefetchLeavesTheLastUnits(t *testing.T) {
	// After the first gateway's grant of one, FairShare (4) are left, or
	// FairShare + 1: a prefetch of one would leave fewer than FairShare.
	for _, limit := range []int64{4, 5} {
		t.Run(strconv.FormatInt(limit, 10), func(t *testing.T) {
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
		})
	}
}
