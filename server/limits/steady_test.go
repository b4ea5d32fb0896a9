package limits

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/clocktest"
	"github.com/tollgate-dev/tollgate/server/keys"
)

// steadyLoad sends n requests for key p at 1,000 per simulated second,
// round-robin over the gateways, each reserving 300 tokens and using 200.
// It returns the admitted requests and the etcd round trips all gateways
// made meanwhile.
//
// Simulated time runs far faster than real time here. With paced set, a
// gateway's background grant lands before its next request, as in real
// time, where an etcd round trip (about a millisecond) is shorter than the
// 3 ms between one gateway's requests at this load. Unpaced, grants lag
// many requests behind and the gateways' compare-and-swaps collide more
// than they would: a pessimistic figure.
func steadyLoad(tb testing.TB, gws []*gateway, clk *clocktest.Clock, p *keys.Principal, n int, paced bool) (admitted, txns int64) {
	tb.Helper()
	var before int64
	for _, g := range gws {
		before += g.Transactions() + g.HealthReads()
	}
	ctx := context.Background()
	start := clk.Now()
	for i := range n {
		clk.Set(start.Add(time.Duration(i) * time.Millisecond))
		g := gws[i%len(gws)]
		r, err := g.Admit(ctx, p, 300)
		var d *Denied
		switch {
		case errors.As(err, &d):
			continue
		case err != nil:
			tb.Fatal(err)
		}
		r.Settle(200)
		admitted++
		if paced {
			g.quiesce(tb)
		}
	}
	for _, g := range gws {
		g.quiesce(tb)
		txns += g.Transactions() + g.HealthReads()
	}
	return admitted, txns - before
}

var steadyCases = []struct {
	name string
	rpm  int64
}{
	{"half-the-limit", 120_000},
	{"at-the-limit", 60_000},
	{"twice-the-limit", 30_000},
}

// At steady load three gateways need few etcd round trips per 1,000
// admitted requests (target ≤ 10): below the limit, at it, and at twice
// the limit, where refusals are answered from memory.
func TestSteadyLoadTransactions(t *testing.T) {
	for _, tc := range steadyCases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			gws := startGateways(t, 3, clk)
			p := principal(tc.rpm, 1<<40)
			admitted, txns := steadyLoad(t, gws, clk, p, 90_000, true) // 1.5 simulated minutes
			per1000 := float64(txns) * 1000 / float64(admitted)
			t.Logf("%d admitted, %d etcd round trips: %.2f per 1,000", admitted, txns, per1000)
			if per1000 > 10 {
				t.Fatalf("%.2f etcd round trips per 1,000 admitted requests, target ≤ 10", per1000)
			}
		})
	}
}

// BenchmarkSteadyLoad reports etcd round trips per 1,000 admitted requests
// for one key with RPM and TPD limits at 1,000 requests per simulated
// second over three gateways, paced and unpaced (see steadyLoad).
func BenchmarkSteadyLoad(b *testing.B) {
	for _, tc := range steadyCases {
		for _, paced := range []bool{true, false} {
			b.Run(tc.name+"/paced="+strconv.FormatBool(paced), func(b *testing.B) {
				clk := newClock()
				gws := startGateways(b, 3, clk)
				p := principal(tc.rpm, 1<<40)
				b.ResetTimer()
				admitted, txns := steadyLoad(b, gws, clk, p, b.N, paced)
				b.StopTimer()
				b.ReportMetric(float64(txns)*1000/float64(max(admitted, 1)), "etcd-txns/1000-req")
			})
		}
	}
}
