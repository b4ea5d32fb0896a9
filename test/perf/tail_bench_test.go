package perf_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkProxyTail is the short loop of BenchmarkProxy's open-loop and
// first-byte measures: one `tollgate dev --vllm` in front of the instant
// upstream, then, for each of a few rounds, the sequential plain p50, the
// streamed time to first byte p50, and an open loop at one rate (p50,
// p99, max), each beside the bare upstream measured in the same round;
// the gateway's RSS at the end. It takes well under a minute, so that a
// change can be measured before and after in one sitting:
//
//	go test -run '^$' -bench '^BenchmarkProxyTail$' -benchtime 1x ./test/perf/
//
// TOLLGATE_TAIL_RATE sets the rate (default 1000), TOLLGATE_TAIL_ROUNDS
// the rounds (default 3), and TOLLGATE_BENCH_JOURNAL_DIR where the
// journal goes (journalDirEnv; default the data directory);
// TOLLGATE_TAIL_BIN runs a tollgate binary built beforehand instead of
// building one, so that two builds can be compared in turn;
// TOLLGATE_TAIL_GATEWAY_ENV adds NAME=value words to the gateway's
// environment alone (GOGC, GOMEMLIMIT), and TOLLGATE_TAIL_GATEWAY_ARGS
// words to its flags (--head-interval 1s); TOLLGATE_TAIL_MODEL sets the
// gateway's model (default mock/<upstream's>, through the vLLM engine;
// builtin/echo answers in the gateway, no upstream reached).
// TOLLGATE_TAIL_PROCESS=gateway
// measures `tollgate gateway` against an etcd of the benchmark's own
// instead of `tollgate dev`, so that the CPU and memory printed are the
// gateway's alone (with the Go runtime's view of its memory).
func BenchmarkProxyTail(b *testing.B) {
	b.ReportMetric(0, "ns/op")
	if b.N > 1 {
		return
	}
	rate := envInt(b, "TOLLGATE_TAIL_RATE", 1000)
	rounds := envInt(b, "TOLLGATE_TAIL_ROUNDS", 3)
	bin := os.Getenv("TOLLGATE_TAIL_BIN")
	if bin == "" {
		bin = buildTollgate(b)
	}
	up := startUpstream(b)
	args := append([]string{"--vllm", "mock=" + up.URL}, strings.Fields(os.Getenv("TOLLGATE_TAIL_GATEWAY_ARGS"))...)
	process, err := proxyProcessOf(os.Getenv("TOLLGATE_TAIL_PROCESS"))
	if err != nil {
		b.Fatal(err)
	}
	opts := devOptions{journalParent: os.Getenv(journalDirEnv), args: args,
		env: strings.Fields(os.Getenv("TOLLGATE_TAIL_GATEWAY_ENV"))}
	model := os.Getenv("TOLLGATE_TAIL_MODEL")
	if model == "" {
		model = "mock/" + upstreamModel
	}
	var dev devProcess
	if process == gatewayProcess {
		dev = startGateway(b, bin, newGatewayCluster(b, bin), opts)
	} else {
		dev = startDev(b, bin, opts)
	}
	fmt.Printf("metrics: %s\nmodel: %s\n", dev.metrics, model)
	defer printGC(b, dev.metrics)
	targets := []struct {
		name string
		ep   endpoint
	}{
		{"bare", endpoint{base: up.URL + "/v1", model: upstreamModel}},
		{"gateway", endpoint{base: dev.base, key: proxyKey, model: model}},
	}
	reqs := make([]requester, len(targets))
	for i, t := range targets {
		r, err := httpClient.dial(t.ep)
		if err != nil {
			b.Fatal(err)
		}
		defer r.close()
		if _, errs, _ := closedLoop(closedConns, warmFor, r.plain); errs > 0 {
			b.Fatalf("%s: %d errors while warming up, e.g. %v", t.name, errs, r.plain())
		}
		reqs[i] = r
	}
	start, err := readProc(dev.pid)
	if err != nil {
		b.Fatal(err)
	}
	sent := 0
	for round := range rounds {
		for i, t := range targets {
			r := reqs[i]
			time.Sleep(settle)
			seq, _ := sequential(1000, 3*time.Second, timed(r.plain))
			slices.Sort(seq)
			time.Sleep(settle)
			ttfb, _ := sequential(500, 3*time.Second, r.streamed)
			slices.Sort(ttfb)
			time.Sleep(settle)
			var run openRun
			n := rate * 5
			onPreciseThread(func() { run = openLoop(preciseClock{}, n, time.Second/time.Duration(rate), maxConns, r.plain) })
			if t.name == "gateway" {
				sent += len(seq) + len(ttfb) + n
			}
			slices.Sort(run.lat)
			slices.Sort(run.lag)
			fmt.Printf("round %d %-8s seq p50 %7s  ttfb p50 %7s  open %d/s p50 %7s p99 %8s max %8s errors %d held %d lag p99 %s\n",
				round, t.name, micros(quantile(seq, 0.5)), micros(quantile(ttfb, 0.5)), rate,
				micros(quantile(run.lat, 0.5)), micros(quantile(run.lat, 0.99)), micros(quantile(run.lat, 1)),
				run.errors, run.heldBack, micros(quantile(run.lag, 0.99)))
		}
	}
	p, err := readProc(dev.pid)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Printf("gateway CPU per request over the rounds: %s µs (%d requests); since its start %s\n",
		micros(cpuPerRequest(start, p, sent)), sent, p.cpu)
	printMappings(b, dev.pid)
	printGoMemory(b, dev.metrics)
	fmt.Printf("gateway RSS after the run: %.1f MiB (anonymous %.1f, file %.1f, shared memory %.1f)\n", mb(p.rss),
		mb(procStatus(b, dev.pid, "RssAnon")), mb(procStatus(b, dev.pid, "RssFile")), mb(procStatus(b, dev.pid, "RssShmem")))
}

// envInt reads a positive integer from the environment, or def.
func envInt(tb testing.TB, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// printGC prints the gateway's collections and their pauses so far, from
// its metrics.
func printGC(b *testing.B, url string) {
	resp, err := http.Get(url)
	if err != nil {
		b.Error(err)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Error(err)
		return
	}
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, "go_gc_duration_seconds_") || strings.HasPrefix(line, "go_gc_gomemlimit_bytes") ||
			strings.HasPrefix(line, "go_gc_gogc_percent") {
			fmt.Print(line)
		}
	}
}
