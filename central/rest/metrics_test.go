package rest_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tollgate-dev/tollgate/central/rest"
	"github.com/tollgate-dev/tollgate/internal/clocktest"
)

// TestInstrument: every answer is counted once under its route and its
// status, and timed under its route with the time its handler took, read
// from a clock only the handler moves (by a different amount on each
// route): the histogram holds exactly that time, in the buckets that hold
// it, and nothing under another route.
func TestInstrument(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	reg := prometheus.NewRegistry()
	m := rest.NewMetrics(reg)
	m.SetClock(clock.Now)
	cases := []struct {
		path  string
		takes time.Duration
		// status is what the handler sets (0: none, it writes a body).
		status      int
		route, code string
	}{
		{"/v1/tenants/acme/audit/heads", 30 * time.Millisecond, 0, rest.RouteHeads, "200"},
		{"/v1/tenants/acme/audit/proof", 1500 * time.Millisecond, http.StatusGone, rest.RouteProof, "410"},
		{"/v1/tenants/acme/audit/nothing", 7 * time.Second, http.StatusNotFound, rest.RouteOther, "404"},
	}
	h := rest.Instrument(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, c := range cases {
			if c.path != r.URL.Path {
				continue
			}
			clock.Advance(c.takes)
			if c.status != 0 {
				w.WriteHeader(c.status)
			}
			_, _ = w.Write([]byte("{}"))
		}
	}), m)
	for _, c := range cases {
		clock.Advance(time.Hour) // between answers: not theirs
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, c.path, nil))
	}

	if n := testutil.CollectAndCount(m.Requests); n != len(cases) {
		t.Errorf("%d series of requests, want one per answer", n)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	type histogram struct {
		count   uint64
		sum     float64
		buckets map[float64]uint64 // cumulative, by upper bound
	}
	histograms := map[string]histogram{}
	for _, f := range families {
		if f.GetName() != "tollgate_central_rest_request_duration_seconds" {
			continue
		}
		for _, s := range f.GetMetric() {
			h := s.GetHistogram()
			buckets := map[float64]uint64{}
			for _, b := range h.GetBucket() {
				buckets[b.GetUpperBound()] = b.GetCumulativeCount()
			}
			for _, l := range s.GetLabel() {
				if l.GetName() == "route" {
					histograms[l.GetValue()] = histogram{h.GetSampleCount(), h.GetSampleSum(), buckets}
				}
			}
		}
	}
	if len(histograms) != len(cases) {
		t.Errorf("durations of routes %v, want one per answer", histograms)
	}
	for _, c := range cases {
		if got := testutil.ToFloat64(m.Requests.WithLabelValues(c.route, c.code)); got != 1 {
			t.Errorf("%s: requests{route=%q,code=%q} = %v, want 1", c.path, c.route, c.code, got)
		}
		got, ok := histograms[c.route]
		if !ok || got.count != 1 || got.sum != c.takes.Seconds() {
			t.Errorf("%s: duration{route=%q} has %d answers taking %vs, want 1 taking %vs", c.path, c.route, got.count, got.sum, c.takes.Seconds())
			continue
		}
		for _, upper := range prometheus.DefBuckets {
			want := uint64(0)
			if c.takes.Seconds() <= upper {
				want = 1
			}
			if got.buckets[upper] != want {
				t.Errorf("%s: duration{route=%q} bucket le=%v holds %d, want %d", c.path, c.route, upper, got.buckets[upper], want)
			}
		}
	}
}
