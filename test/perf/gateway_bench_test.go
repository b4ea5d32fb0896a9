// Package perf_test measures what the gateway adds to a request: the same
// HTTP client, on the same loopback, against a bare Go handler and against
// a full appliance (auth, policy, builtin engine over gRPC, durable audit
// event). Run:
//
//	go test -run '^$' -bench . -benchtime 5000x ./test/perf/
//
// BenchmarkProxy (make bench-proxy) is the real path in one run: the
// gateway in a process of its own in front of an instant vLLM-compatible
// upstream, against that upstream alone; it prints one table.
//
// Figures are recorded in docs/performance.md.
package perf_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/appliance"
	"github.com/tollgate-dev/tollgate/audit/fleet"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/internal/gctune"
	"github.com/tollgate-dev/tollgate/server/policy"
)

// TestMain runs the benchmarks under the GC pacing the tollgate binary
// sets (internal/gctune), so that they measure what it runs.
func TestMain(m *testing.M) {
	gctune.Apply()
	etcdtest.Main(m)
}

var chatBody = chatRequest("builtin/echo", false)

// chatRequest is the benchmarks' chat completion for model, streamed or
// not. Both the built-in echo model and vllmfake answer its message with
// the same words.
func chatRequest(model string, stream bool) string {
	s := ""
	if stream {
		s = `,"stream":true`
	}
	return `{"model":"` + model + `","messages":[{"role":"user","content":"` + chatWords + `"}]` + s + `}`
}

const chatWords = "hello big world"

// bareReply is what a bare handler answers: the same bytes a completion has.
const bareReply = `{"id":"req_0000000000000000000000000","object":"chat.completion","created":1,"model":"builtin/echo","choices":[{"index":0,"message":{"role":"assistant","content":"hello big world","refusal":null},"finish_reason":"stop","logprobs":null}],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}`

// withAudit and withPolicy switch the appliance's hooks for the variants.
type variant struct {
	name          string
	policy, audit bool
	bare          bool
}

func BenchmarkAddedLatency(b *testing.B) {
	for _, v := range []variant{
		{name: "bare-handler", bare: true},
		{name: "gateway-auth-only"},
		{name: "gateway-auth-policy", policy: true},
		{name: "gateway-auth-policy-audit", policy: true, audit: true},
	} {
		b.Run(v.name, func(b *testing.B) {
			url, _ := startTarget(b, v)
			measure(b, url)
		})
	}
}

// startTarget starts the variant's server and returns its chat completion
// URL, and its audit log when it has one.
func startTarget(b *testing.B, v variant) (string, *auditlog.Log) {
	b.Helper()
	if v.bare {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(bareReply))
		})}
		go func() { _ = srv.Serve(lis) }()
		b.Cleanup(func() { _ = srv.Close() })
		return "http://" + lis.Addr().String() + "/v1/chat/completions", nil
	}
	var cfg appliance.Config
	if v.policy {
		var err error
		if cfg.Policy, err = policy.Load(context.Background(), "../../examples/policy", policy.LoadOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	var audit *auditlog.Log
	if v.audit {
		dir := b.TempDir()
		signer, _, err := fleet.EnsureDev(dir, "app_perf")
		if err != nil {
			b.Fatal(err)
		}
		if audit, err = auditlog.Open(filepath.Join(dir, "audit"), auditlog.Options{Signer: signer}); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = audit.Close() }) // after the appliance stopped
		cfg.Audit, cfg.ApplianceID = audit, signer.ID
	}
	url, _ := runAppliance(b, cfg)
	return url, audit
}

// BenchmarkAddedLatencyPaced offers a steady load below saturation (an
// open loop: a request starts every 1/rate seconds on its own goroutine,
// whatever the earlier ones do), so its percentiles are what a request
// pays at that load rather than queueing behind the client's own:
//
//	go test -run '^$' -bench AddedLatencyPaced -benchtime 10000x ./test/perf/
func BenchmarkAddedLatencyPaced(b *testing.B) {
	for _, rate := range []int{1000, 3000} {
		for _, v := range []variant{
			{name: "bare-handler", bare: true},
			{name: "gateway-auth-policy", policy: true},
			{name: "gateway-auth-policy-audit", policy: true, audit: true},
		} {
			b.Run(fmt.Sprintf("rate=%d/%s", rate, v.name), func(b *testing.B) {
				url, audit := startTarget(b, v)
				var histograms func() map[string]bucketCounts
				if audit != nil {
					histograms = func() map[string]bucketCounts { return auditHistograms(b, audit) }
				}
				measurePaced(b, url, nil, rate, histograms)
			})
		}
	}
}

// client returns an HTTP client of up to conns keep-alive connections
// (over TLS with tlsCfg, an https URL) and a function that sends one chat
// completion and returns its latency.
func client(b *testing.B, url string, tlsCfg *tls.Config, conns int) (*http.Transport, func() time.Duration) {
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, TLSClientConfig: tlsCfg}
	hc := &http.Client{Transport: tr}
	return tr, func() time.Duration {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(chatBody))
		req.Header.Set("Authorization", "Bearer tgk_test_acme_all")
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			b.Error(err)
			return 0
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("hello big world")) {
			b.Errorf("status %d: %s", resp.StatusCode, body)
		}
		return d
	}
}

// measurePaced also reports the audit step's own percentiles when
// histograms reads the audit log's (audit-p50-µs, audit-p99-µs: the time
// Append took, from the log's tollgate_audit_append_seconds histogram over
// the measured requests), and the journal syncs' tail over the same time
// (sync-p99-µs, sync-p99.9-µs, from tollgate_audit_sync_seconds): the
// disk's share.
func measurePaced(b *testing.B, url string, tlsCfg *tls.Config, rate int, histograms func() map[string]bucketCounts) {
	const conns = 64
	tr, send := client(b, url, tlsCfg, conns)
	defer tr.CloseIdleConnections()
	var warm sync.WaitGroup
	for range conns { // open every connection, warm caches
		warm.Go(func() {
			for range 5 {
				send()
			}
		})
	}
	warm.Wait()
	var auditBefore map[string]bucketCounts
	if histograms != nil {
		auditBefore = histograms()
	}
	lat := make([]time.Duration, b.N) // each request writes its own slot
	tick := time.Second / time.Duration(rate)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if wait := time.Until(start.Add(time.Duration(i) * tick)); wait > 0 {
			time.Sleep(wait)
		}
		wg.Go(func() { lat[i] = send() })
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	report(b, lat, elapsed)
	if histograms != nil {
		after := histograms()
		step := histogramDelta(auditBefore["tollgate_audit_append_seconds"], after["tollgate_audit_append_seconds"])
		b.ReportMetric(histogramQuantile(step, 0.50)*1e6, "audit-p50-µs")
		b.ReportMetric(histogramQuantile(step, 0.99)*1e6, "audit-p99-µs")
		disk := histogramDelta(auditBefore["tollgate_audit_sync_seconds"], after["tollgate_audit_sync_seconds"])
		b.ReportMetric(histogramQuantile(disk, 0.99)*1e6, "sync-p99-µs")
		b.ReportMetric(histogramQuantile(disk, 0.999)*1e6, "sync-p99.9-µs")
	}
}

func report(b *testing.B, lat []time.Duration, elapsed time.Duration) {
	slices.Sort(lat)
	pct := func(q float64) float64 { return float64(quantile(lat, q).Microseconds()) }
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "req/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

// quantile is the q-quantile of sorted latencies (the nearest rank
// below), 0 for none.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(q*float64(len(sorted)-1))]
}

// measure sends b.N requests from a few concurrent clients with keep-alive
// and reports throughput and latency percentiles.
func measure(b *testing.B, url string) {
	const clients = 4
	tr, send := client(b, url, nil, clients)
	defer tr.CloseIdleConnections()
	for range 200 { // warm up connections and caches
		send()
	}
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	work := make(chan struct{}, b.N)
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, b.N/clients+1)
			for range work {
				local = append(local, send())
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	report(b, lat, elapsed)
}
