package limits

import (
	"context"
	"math"
	"math/bits"
	"sync"
	"testing"
	"time"
)

// latencies is a log-linear histogram of durations (16 sub-buckets per
// power of two), so a benchmark can report a p99 without storing b.N
// samples or allocating while it measures.
type latencies struct{ counts [64 * 16]int64 }

func (h *latencies) add(d time.Duration) {
	ns := uint64(max(d, 1))
	e := bits.Len64(ns) - 1
	sub := uint64(0)
	if e >= 4 {
		sub = (ns >> (e - 4)) & 15
	} else {
		sub = (ns << (4 - e)) & 15
	}
	h.counts[e*16+int(sub)]++
}

func (h *latencies) merge(o *latencies) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
}

// quantile returns the upper bound of the bucket holding quantile q.
func (h *latencies) quantile(q float64) float64 {
	var total int64
	for _, c := range h.counts {
		total += c
	}
	rank := int64(math.Ceil(q * float64(total)))
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen >= rank && c > 0 {
			e, sub := i/16, i%16
			return math.Ldexp(1+float64(sub+1)/16, e)
		}
	}
	return 0
}

// BenchmarkAdmitHit measures admit + settle when the held slices cover the
// request (the hit path): one mutex, no etcd, no allocation. It reports
// the p50 and p99 of single calls (each including two clock reads).
func BenchmarkAdmitHit(b *testing.B) {
	g := startGateways(b, 1, newClock())[0]
	p := principal(1<<40, 1<<50)
	ctx := context.Background()
	for range 1000 { // build a rate, so slices are large
		r, err := g.Admit(ctx, p, 10)
		if err != nil {
			b.Fatal(err)
		}
		r.Settle(8)
	}
	g.quiesce(b)
	h := new(latencies)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		r, err := g.Admit(ctx, p, 10)
		r.Settle(8)
		h.add(time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(h.quantile(0.50), "p50-ns")
	b.ReportMetric(h.quantile(0.99), "p99-ns")
}

// BenchmarkAdmitHitParallel is the hit path with every core admitting for
// the same key (one mutex per key).
func BenchmarkAdmitHitParallel(b *testing.B) {
	g := startGateways(b, 1, newClock())[0]
	p := principal(1<<40, 1<<50)
	ctx := context.Background()
	for range 1000 {
		r, err := g.Admit(ctx, p, 10)
		if err != nil {
			b.Fatal(err)
		}
		r.Settle(8)
	}
	g.quiesce(b)
	var (
		mu  sync.Mutex
		all latencies
	)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		h := new(latencies)
		for pb.Next() {
			start := time.Now()
			r, err := g.Admit(ctx, p, 10)
			r.Settle(8)
			h.add(time.Since(start))
			if err != nil {
				b.Error(err)
				return
			}
		}
		mu.Lock()
		all.merge(h)
		mu.Unlock()
	})
	b.StopTimer()
	b.ReportMetric(all.quantile(0.50), "p50-ns")
	b.ReportMetric(all.quantile(0.99), "p99-ns")
}
