package service

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-dev/tollgate/central/ingest"
)

// Outcomes of an upload (IngestMetrics.Uploads).
const (
	// OutcomeStored: the head was stored, with its new leaves.
	OutcomeStored = "stored"
	// OutcomeDuplicate: the head was stored already, or said nothing the
	// stored one does not; accepted, nothing written.
	OutcomeDuplicate = "duplicate"
	// OutcomeRefused: refused for good, with a reason of the refusal
	// table (counted in Refusals too), or before its head was read: more
	// leaves than an upload may hold, or a malformed stream.
	OutcomeRefused = "refused"
	// OutcomeBusy: refused at once at the ingest limits (Unavailable).
	OutcomeBusy = "busy"
	// OutcomeIncomplete: ended before it was all received: idle too
	// long, past the maximum upload time, ended before the leaves it
	// announced, or the appliance went away.
	OutcomeIncomplete = "incomplete"
	// OutcomeFailed: the store failed; nothing was stored.
	OutcomeFailed = "failed"
)

var outcomes = []string{OutcomeStored, OutcomeDuplicate, OutcomeRefused, OutcomeBusy, OutcomeIncomplete, OutcomeFailed}

// IngestMetrics are the ingest service's Prometheus collectors. Register
// them with the registry the plane serves on its metrics address, and
// hand them to NewIngest (IngestOptions.Metrics).
type IngestMetrics struct {
	// Uploads counts the PublishHead streams answered, by outcome.
	Uploads *prometheus.CounterVec
	// Refusals counts the heads refused with a reason, by reason
	// (ingest.Reasons).
	Refusals *prometheus.CounterVec
	// Leaves counts the leaves stored: those new to their tree, not those
	// an upload sent again.
	Leaves prometheus.Counter
	// ForkEvidence counts what became of the evidence of forked heads,
	// by outcome (ingest.Evidences).
	ForkEvidence *prometheus.CounterVec
	// InProgress and PendingLeaves read the budget of the Ingest the
	// metrics were handed to: the uploads admitted and not yet answered,
	// and the leaves they announced.
	InProgress, PendingLeaves prometheus.GaugeFunc
	budget                    atomic.Pointer[budget]
}

// NewIngestMetrics returns the ingest collectors, registered with reg.
// Every outcome and reason is there from the start, at 0.
func NewIngestMetrics(reg prometheus.Registerer) *IngestMetrics {
	m := &IngestMetrics{
		Uploads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_central_ingest_uploads_total",
			Help: "Appliance uploads (PublishHead) answered, by outcome: stored, duplicate, refused, busy, incomplete or failed.",
		}, []string{"outcome"}),
		Refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_central_ingest_refusals_total",
			Help: "Heads refused, by reason; inconsistent is a forked head, evidence that an appliance signed two views of a tree.",
		}, []string{"reason"}),
		Leaves: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tollgate_central_ingest_leaves_total",
			Help: "Leaves stored, new to their tree.",
		}),
		ForkEvidence: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_central_ingest_fork_evidence_total",
			Help: "Evidence of forked heads, by outcome: recorded, duplicate (kept already), over_limit (the tree holds the most forks kept) or failed (the store failed).",
		}, []string{"outcome"}),
	}
	m.InProgress = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tollgate_central_ingest_uploads_in_progress",
		Help: "Appliance uploads admitted and not yet answered; at --ingest-max-uploads more are refused as busy.",
	}, func() float64 { return float64(m.held().uploads) })
	m.PendingLeaves = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tollgate_central_ingest_pending_leaves",
		Help: "Leaves the uploads in progress announced, the memory they hold; at --ingest-max-pending-leaves more are refused as busy.",
	}, func() float64 { return float64(m.held().leaves) })
	for _, o := range outcomes {
		m.Uploads.WithLabelValues(o)
	}
	for _, r := range ingest.Reasons {
		m.Refusals.WithLabelValues(r)
	}
	for _, e := range ingest.Evidences {
		m.ForkEvidence.WithLabelValues(e)
	}
	reg.MustRegister(m.Uploads, m.Refusals, m.Leaves, m.ForkEvidence, m.InProgress, m.PendingLeaves)
	return m
}

// held is what the budget holds in all (zero before NewIngest).
func (m *IngestMetrics) held() held {
	b := m.budget.Load()
	if b == nil {
		return held{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return held{uploads: b.uploads, leaves: b.leaves}
}

// count adds an answered upload; reason is the refusal's, if any, and
// evidence what became of a fork's evidence, if anything.
func (m *IngestMetrics) count(outcome, reason, evidence string) {
	if m == nil {
		return
	}
	m.Uploads.WithLabelValues(outcome).Inc()
	if reason != "" {
		m.Refusals.WithLabelValues(reason).Inc()
	}
	if evidence != "" {
		m.ForkEvidence.WithLabelValues(evidence).Inc()
	}
}

// stored adds the leaves a stored head brought.
func (m *IngestMetrics) stored(leaves int) {
	if m != nil && leaves > 0 {
		m.Leaves.Add(float64(leaves))
	}
}
