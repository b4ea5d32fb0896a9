package portal

import "github.com/prometheus/client_golang/prometheus"

// Metrics count what happens in the portal.
type Metrics struct {
	signIns *prometheus.CounterVec
	// twoStepChanges counts two-step sign-in turned on and off by
	// administrators themselves.
	twoStepChanges *prometheus.CounterVec
	keyOps         *prometheus.CounterVec
}

var _ prometheus.Collector = (*Metrics)(nil)

// NewMetrics returns the portal's metrics, to be registered once.
func NewMetrics() *Metrics {
	return &Metrics{
		signIns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_portal_sign_ins_total",
			Help: "Sign-in attempts at the operator portal, by outcome (ok, failed, wrong_code: the right password with a wrong two-step code, code_reused, throttled, address_limited).",
		}, []string{"outcome"}),
		twoStepChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_portal_two_step_changes_total",
			Help: "Two-step sign-in turned on or off by administrators at the operator portal (operator resets are not counted).",
		}, []string{"change"}),
		keyOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_portal_key_operations_total",
			Help: "Keys created and revoked through the operator portal.",
		}, []string{"operation"}),
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.signIns.Describe(ch)
	m.twoStepChanges.Describe(ch)
	m.keyOps.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.signIns.Collect(ch)
	m.twoStepChanges.Collect(ch)
	m.keyOps.Collect(ch)
}
