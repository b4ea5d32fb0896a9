package edge

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the edge's Prometheus collectors. Register them with the
// registry the appliance serves on its metrics address.
type Metrics struct {
	// Requests counts responses by route and status code.
	Requests *prometheus.CounterVec
	// Unauthenticated counts requests refused for a missing, unknown,
	// expired or revoked key: they belong to no tenant's audit tree.
	Unauthenticated prometheus.Counter
	// Busy counts requests refused with 503 because MaxInFlight were
	// being served.
	Busy prometheus.Counter
	// InFlight is the requests being served (GET /healthz aside): beside
	// Busy, how close the gateway runs to MaxInFlight. It reads the
	// Server's own count (its slots), set by New.
	InFlight prometheus.GaugeFunc
	inFlight atomic.Pointer[func() int]
}

// NewMetrics returns the edge's collectors, registered with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_gateway_requests_total",
			Help: "Gateway responses by route and HTTP status.",
		}, []string{"route", "code"}),
		Unauthenticated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tollgate_gateway_unauthenticated_requests_total",
			Help: "Requests refused with 401 for a missing, unknown, expired or revoked key.",
		}),
		Busy: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tollgate_gateway_busy_refusals_total",
			Help: "Requests refused with 503 because the gateway was serving --max-in-flight requests.",
		}),
	}
	m.InFlight = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tollgate_gateway_in_flight_requests",
		Help: "Requests being served, streams included (GET /healthz aside); at --max-in-flight more are refused.",
	}, func() float64 {
		if n := m.inFlight.Load(); n != nil {
			return float64((*n)())
		}
		return 0
	})
	reg.MustRegister(m.Requests, m.Unauthenticated, m.Busy, m.InFlight)
	return m
}

// count adds a response to the request metrics.
func (s *Server) count(rc *requestContext, status int) {
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.Requests.WithLabelValues(rc.endpoint, strconv.Itoa(status)).Inc()
	}
}
