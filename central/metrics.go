package central

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-dev/tollgate/central/store"
)

// metrics are the plane's collectors besides those of ingest
// (service.IngestMetrics) and REST (rest.Metrics): retention's.
type metrics struct {
	pruneRuns       *prometheus.CounterVec
	prunedTrees     prometheus.Counter
	prunedLeafTrees prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		pruneRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_central_prune_runs_total",
			Help: "Retention passes, by outcome: ok or failed.",
		}, []string{"outcome"}),
		prunedTrees: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tollgate_central_pruned_trees_total",
			Help: "Trees deleted whole, heads included, past the head retention (10 years).",
		}),
		prunedLeafTrees: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tollgate_central_pruned_leaf_trees_total",
			Help: "Trees whose leaves and nodes were deleted past their leaf retention, their heads remaining (trees an older central plane stored with the appliance's body retention).",
		}),
	}
	m.pruneRuns.WithLabelValues("ok")
	m.pruneRuns.WithLabelValues("failed")
	reg.MustRegister(m.pruneRuns, m.prunedTrees, m.prunedLeafTrees)
	return m
}

// pruned adds a retention pass; one that failed because the plane is
// stopping is not counted.
func (m *metrics) pruned(p store.Pruned, err error, stopping bool) {
	if m == nil || (err != nil && stopping) {
		return
	}
	m.prunedTrees.Add(float64(p.Trees))
	m.prunedLeafTrees.Add(float64(p.LeafTrees))
	if err != nil {
		m.pruneRuns.WithLabelValues("failed").Inc()
		return
	}
	m.pruneRuns.WithLabelValues("ok").Inc()
}
