package perf_test

import (
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	auditlog "github.com/tollgate-dev/tollgate/audit/log"
)

// bucketCounts is a histogram as cumulative counts per upper bound, the
// last bound +Inf.
type bucketCounts struct {
	bounds []float64
	counts []uint64
}

// auditHistograms reads the audit log's duration histograms by name:
// tollgate_audit_append_seconds (the audit step) and
// tollgate_audit_sync_seconds (the disk's share of it).
func auditHistograms(b *testing.B, l *auditlog.Log) map[string]bucketCounts {
	b.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(l.Metrics())
	families, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	return auditFamilies(b, families)
}

// scrapedHistograms reads the same histograms from a process's /metrics.
func scrapedHistograms(b *testing.B, metricsURL string) map[string]bucketCounts {
	b.Helper()
	resp, err := http.Get(metricsURL)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	byName, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		b.Fatalf("%s: %v", metricsURL, err)
	}
	families := make([]*dto.MetricFamily, 0, len(byName))
	for _, f := range byName {
		families = append(families, f)
	}
	return auditFamilies(b, families)
}

func auditFamilies(b *testing.B, families []*dto.MetricFamily) map[string]bucketCounts {
	b.Helper()
	hs := map[string]bucketCounts{}
	for _, f := range families {
		if h := f.GetMetric()[0].GetHistogram(); h != nil {
			hs[f.GetName()] = fromDTO(h)
		}
	}
	for _, name := range []string{"tollgate_audit_append_seconds", "tollgate_audit_sync_seconds"} {
		if _, ok := hs[name]; !ok {
			b.Fatalf("%s not collected", name)
		}
	}
	return hs
}

func fromDTO(h *dto.Histogram) bucketCounts {
	var c bucketCounts
	for _, bk := range h.GetBucket() {
		c.bounds = append(c.bounds, bk.GetUpperBound())
		c.counts = append(c.counts, bk.GetCumulativeCount())
	}
	c.bounds = append(c.bounds, math.Inf(1))
	c.counts = append(c.counts, h.GetSampleCount())
	return c
}

// histogramDelta is what was observed between two readings.
func histogramDelta(before, after bucketCounts) bucketCounts {
	d := bucketCounts{bounds: after.bounds, counts: make([]uint64, len(after.counts))}
	for i := range after.counts {
		d.counts[i] = after.counts[i]
		if i < len(before.counts) {
			d.counts[i] -= before.counts[i]
		}
	}
	return d
}

// histogramQuantile estimates quantile q as Prometheus' histogram_quantile
// does: linearly within the bucket that holds it (so the figure is as
// fine as the buckets, 50 µs to 100 µs around 1 ms). A quantile in the
// +Inf bucket is reported as the last finite bound.
func histogramQuantile(c bucketCounts, q float64) float64 {
	n := len(c.counts)
	if n == 0 || c.counts[n-1] == 0 {
		return math.NaN()
	}
	rank := q * float64(c.counts[n-1])
	for i, cum := range c.counts {
		if float64(cum) < rank {
			continue
		}
		if math.IsInf(c.bounds[i], 1) {
			return c.bounds[i-1]
		}
		lo, below := 0.0, uint64(0)
		if i > 0 {
			lo, below = c.bounds[i-1], c.counts[i-1]
		}
		in := cum - below
		if in == 0 {
			return c.bounds[i]
		}
		return lo + (c.bounds[i]-lo)*(rank-float64(below))/float64(in)
	}
	return c.bounds[n-2]
}

func TestHistogramQuantile(t *testing.T) {
	// 100 observations: 50 in (0, 1], 40 in (1, 2], 10 in (2, 4].
	c := bucketCounts{bounds: []float64{1, 2, 4, math.Inf(1)}, counts: []uint64{50, 90, 100, 100}}
	for _, tc := range []struct{ q, want float64 }{
		{0.25, 0.5}, {0.50, 1}, {0.70, 1.5}, {0.95, 3}, {0.99, 3.8}, {1, 4},
	} {
		if got := histogramQuantile(c, tc.q); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("q%.2f = %g, want %g", tc.q, got, tc.want)
		}
	}
	d := histogramDelta(bucketCounts{counts: []uint64{10, 10, 10, 10}}, c)
	if d.counts[0] != 40 || d.counts[3] != 90 {
		t.Errorf("delta %v", d.counts)
	}
	tail := bucketCounts{bounds: []float64{1, math.Inf(1)}, counts: []uint64{0, 5}}
	if got := histogramQuantile(tail, 0.5); got != 1 {
		t.Errorf("+Inf bucket: %g, want the last finite bound", got)
	}
	if got := histogramQuantile(bucketCounts{}, 0.5); !math.IsNaN(got) {
		t.Errorf("empty: %g", got)
	}
}

func TestQuantile(t *testing.T) {
	lat := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0, 1}, {0.5, 5}, {0.99, 9}, {1, 10}} {
		if got := quantile(lat, tc.q); got != tc.want {
			t.Errorf("q%.2f = %d, want %d", tc.q, got, tc.want)
		}
	}
	if got := quantile(nil, 0.5); got != 0 {
		t.Errorf("no latencies: %d", got)
	}
}
