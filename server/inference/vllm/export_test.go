package vllm

import (
	"bufio"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Gauge is one of m's gauges ("up" or "models") of namespace, for tests.
func Gauge(m *Metrics, which, namespace string) prometheus.Gauge {
	if which == "up" {
		return m.up.WithLabelValues(namespace)
	}
	return m.models.WithLabelValues(namespace)
}

// Calls is m's count of calls, for tests.
func Calls(m *Metrics, namespace, call, outcome string) float64 {
	return testutil.ToFloat64(m.calls.WithLabelValues(namespace, call, outcome))
}

// Relay is relay, for benchmarks.
var Relay = relay

// PoolStats is the open and idle connections of t's pool for the server
// at base (scheme://host:port), for tests.
func PoolStats(t *Transport, base string) (open, idle int) {
	scheme, host, _ := strings.Cut(base, "://")
	t.mu.Lock()
	p := t.pools[poolKey{scheme, host}]
	t.mu.Unlock()
	if p == nil {
		return 0, 0
	}
	return p.stats()
}

// WriteRequest is writeRequest, and Written says whether it writes req
// itself (not through req.Write), for tests.
func WriteRequest(w *bufio.Writer, req *http.Request) error { return writeRequest(w, req) }

func Written(req *http.Request) bool {
	_, _, ok := plainRequest(req)
	return ok
}
