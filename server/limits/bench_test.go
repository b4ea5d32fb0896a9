package limits

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/etcdtest"
)

// BenchmarkAdmitHit measures the admission check when the held slice
// covers the request (the hit path): one mutex, no allocation, no etcd.
func BenchmarkAdmitHit(b *testing.B) {
	clk := newClock()
	g := startGatewaysB(b, clk, etcdtest.Prefix(b))
	p := principal(1<<40, 1<<50)
	ctx := context.Background()
	for range 1000 { // build a rate, so slices are large
		r, err := g.Admit(ctx, p, 10)
		if err != nil {
			b.Fatal(err)
		}
		r.Settle(8)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		r, err := g.Admit(ctx, p, 10)
		r.Settle(8)
		lat = append(lat, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
}

// BenchmarkSteadyLoad reports etcd round trips per 1,000 admitted requests
// for one key at a steady rate, three gateways sharing it.
func BenchmarkSteadyLoad(b *testing.B) {
	clk := newClock()
	gws := make([]*gateway, 3)
	prefix := etcdtest.Prefix(b)
	for i := range gws {
		gws[i] = startGatewaysB(b, clk, prefix)
	}
	p := principal(1<<40, 0)
	ctx := context.Background()
	start := clk.Now()
	b.ResetTimer()
	for i := range b.N {
		// 1,000 requests per simulated second, spread over the gateways.
		clk.Set(start.Add(time.Duration(i) * time.Millisecond))
		if _, err := gws[i%3].Admit(ctx, p, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	var txns int64
	for _, g := range gws {
		txns += g.Transactions()
	}
	b.ReportMetric(float64(txns)*1000/float64(b.N), "etcd-txns/1000-req")
}
