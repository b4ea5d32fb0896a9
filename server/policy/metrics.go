package policy

import "github.com/prometheus/client_golang/prometheus"

var (
	descMemoHits = prometheus.NewDesc("tollgate_policy_memo_hits_total",
		"Decisions that reused the output the active bundle evaluated for an earlier, equal input (docs/policy.md), since start.", nil, nil)
	descMemoMisses = prometheus.NewDesc("tollgate_policy_memo_misses_total",
		"Decisions of a memoizing bundle that evaluated it, since start.", nil, nil)
	descMemoEntries = prometheus.NewDesc("tollgate_policy_memo_entries",
		"Outputs the active bundle's decision memo holds.", nil, nil)
	descMemoBytes = prometheus.NewDesc("tollgate_policy_memo_bytes",
		"Approximate bytes the active bundle's decision memo holds.", nil, nil)
	descMemoOn = prometheus.NewDesc("tollgate_policy_memo_enabled",
		"1 when the active bundle's decisions are memoized, 0 when every decision evaluates it.", nil, nil)
)

// MemoStats are the decision memo's counters and the active bundle's
// memo size.
type MemoStats struct {
	// Hits and Misses count, across reloads, decisions of memoizing
	// bundles that reused an output and that evaluated the bundle.
	Hits, Misses uint64
	// Entries and Bytes are what the active bundle's memo holds; zero
	// when it memoizes nothing.
	Entries, Bytes int
	// Enabled: the active bundle's decisions are memoized.
	Enabled bool
}

// MemoStats returns the decision memo's figures.
func (e *Engine) MemoStats() MemoStats {
	s := MemoStats{Hits: e.memoHits.Load(), Misses: e.memoMisses.Load()}
	if m := e.Active().memo; m != nil {
		s.Enabled = true
		s.Entries, s.Bytes = m.stats()
	}
	return s
}

// Metrics returns a Prometheus collector of the decision memo's figures,
// to register with the appliance's registry.
func (e *Engine) Metrics() prometheus.Collector { return collector{e} }

type collector struct{ e *Engine }

// Describe implements prometheus.Collector.
func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descMemoHits, descMemoMisses, descMemoEntries, descMemoBytes, descMemoOn} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.e.MemoStats()
	on := 0.0
	if s.Enabled {
		on = 1
	}
	ch <- prometheus.MustNewConstMetric(descMemoHits, prometheus.CounterValue, float64(s.Hits))
	ch <- prometheus.MustNewConstMetric(descMemoMisses, prometheus.CounterValue, float64(s.Misses))
	ch <- prometheus.MustNewConstMetric(descMemoEntries, prometheus.GaugeValue, float64(s.Entries))
	ch <- prometheus.MustNewConstMetric(descMemoBytes, prometheus.GaugeValue, float64(s.Bytes))
	ch <- prometheus.MustNewConstMetric(descMemoOn, prometheus.GaugeValue, on)
}
