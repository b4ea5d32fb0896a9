package rest

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Routes of the REST metrics: the API's five routes, and everything else
// (the OpenAPI document, unknown paths), so that the label set stays
// bounded whatever paths clients send.
const (
	RouteHeads       = "heads"
	RouteProof       = "proof"
	RouteForks       = "forks"
	RouteHistory     = "history"
	RouteConsistency = "consistency"
	RouteOther       = "other"
)

// Metrics are the REST API's Prometheus collectors (Instrument).
type Metrics struct {
	// Requests counts answers by route and HTTP status.
	Requests *prometheus.CounterVec
	// Duration observes how long each answer took, by route.
	Duration *prometheus.HistogramVec
	// now is the clock answers are timed with (nil: time.Now); tests set
	// one they move.
	now func() time.Time
}

// NewMetrics returns the REST collectors, registered with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_central_rest_requests_total",
			Help: "REST audit API answers by route (heads, proof, forks, history, consistency or other) and HTTP status.",
		}, []string{"route", "code"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tollgate_central_rest_request_duration_seconds",
			Help:    "Time from a REST request's headers to the end of its answer, by route (heads, proof, forks, history, consistency or other).",
			Buckets: prometheus.DefBuckets,
		}, []string{"route"}),
	}
	reg.MustRegister(m.Requests, m.Duration)
	return m
}

// Instrument counts and times every answer of next in m.
func Instrument(next http.Handler, m *Metrics) http.Handler {
	now := m.now
	if now == nil {
		now = time.Now
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			route := routeOf(r)
			code := sw.status
			if code == 0 {
				code = http.StatusOK
			}
			m.Requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
			m.Duration.WithLabelValues(route).Observe(now().Sub(start).Seconds())
		}()
		next.ServeHTTP(sw, r)
	})
}

// routeOf is the route of r's path: /v1/tenants/{tenant_id}/audit/heads,
// .../proof, .../forks, .../history or .../consistency, or other.
func routeOf(r *http.Request) string {
	seg := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	if len(seg) != 5 || seg[0] != "v1" || seg[1] != "tenants" || seg[2] == "" || seg[3] != "audit" {
		return RouteOther
	}
	switch seg[4] {
	case RouteHeads, RouteProof, RouteForks, RouteHistory, RouteConsistency:
		return seg[4]
	}
	return RouteOther
}

// statusWriter records the status of an answer. Unwrap keeps
// http.ResponseController working through it (bodiesUnread sets a read
// deadline).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= http.StatusOK {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
