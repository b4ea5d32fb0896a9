package vllm

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Metrics are the model servers' metrics, shared by every engine of an
// appliance (Config.Metrics) and registered once with its registry.
type Metrics struct {
	up        *prometheus.GaugeVec
	models    *prometheus.GaugeVec
	calls     *prometheus.CounterVec
	firstByte *prometheus.HistogramVec
}

// NewMetrics returns the metrics, to register as a prometheus.Collector.
func NewMetrics() *Metrics {
	return &Metrics{
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tollgate_model_server_up",
			Help: "1 when the model server's last model list read succeeded, 0 when it failed.",
		}, []string{"namespace"}),
		models: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tollgate_model_server_models",
			Help: "Models the model server listed at the last successful read.",
		}, []string{"namespace"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_model_server_calls_total",
			Help: "Calls to the model server by call (chat, tokenize, embeddings, models) and outcome " +
				"(ok, refused: 400 for the client; unavailable: unreachable, busy or model gone; error; cancelled).",
		}, []string{"namespace", "call", "outcome"}),
		firstByte: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tollgate_model_server_response_seconds",
			Help:    "Time from sending a call to the model server to its response's header (for a completion, its stream's start).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"namespace", "call"}),
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.up.Describe(ch)
	m.models.Describe(ch)
	m.calls.Describe(ch)
	m.firstByte.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.up.Collect(ch)
	m.models.Collect(ch)
	m.calls.Collect(ch)
	m.firstByte.Collect(ch)
}

// observe records one call's outcome. A nil m records nothing.
func (m *Metrics) observe(namespace, call string, err error) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(namespace, call, outcome(err)).Inc()
}

func (m *Metrics) responded(namespace, call string, d time.Duration) {
	if m == nil {
		return
	}
	m.firstByte.WithLabelValues(namespace, call).Observe(d.Seconds())
}

func (m *Metrics) listed(namespace string, n int, err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.up.WithLabelValues(namespace).Set(0)
		return
	}
	m.up.WithLabelValues(namespace).Set(1)
	m.models.WithLabelValues(namespace).Set(float64(n))
}

func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "cancelled"
	}
	switch status.Code(err) {
	case codes.InvalidArgument:
		return "refused"
	case codes.Unavailable, codes.NotFound:
		return "unavailable"
	}
	return "error"
}
