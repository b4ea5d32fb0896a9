package perf_test

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkProxy measures the real path of a request in one run: an
// instant vLLM-compatible upstream (upstream, in this process), and
// `tollgate dev` built for the run, in a process of its own, serving it
// with --vllm (a key with RPM and no TPD, the default policy, the durable
// audit log), each under the same load, the upstream alone too, so that
// what the gateway adds is the difference. The gateways and their
// columns are proxyGateways': the journal on disk and on tmpfs, each
// through the vLLM engine and with builtin/echo, by HTTP and gRPC, and
// builtin/echo by HTTP on tmpfs with a head signed every second
// (--head-interval 1s), beside the default interval's. It prints one
// table; see docs/performance.md. `make bench-proxy` runs it:
//
//	go test -run '^$' -bench '^BenchmarkProxy$' -benchtime 1x ./test/perf/
//
// PROXY_PROCESS=gateway (`make bench-proxy PROCESS=gateway`) measures
// `tollgate gateway` instead, against this process's embedded etcd, so
// that its CPU and RSS rows are the gateway's alone, without dev's
// embedded etcd and the rest of dev. PROXY_GATEWAY_ENV (`make
// bench-proxy GATEWAY_ENV=GOMAXPROCS=1`) adds NAME=value words to the
// measured process's environment alone.
func BenchmarkProxy(b *testing.B) {
	b.ReportMetric(0, "ns/op") // the table is the result
	if b.N > 1 {
		return // one run is the measurement; -benchtime Nx does not repeat it
	}
	process, err := proxyProcessOf(os.Getenv("PROXY_PROCESS"))
	if err != nil {
		b.Fatal(err)
	}
	bin := buildTollgate(b)
	up := startUpstream(b)
	start := func(o devOptions) devProcess { return startDev(b, bin, o) }
	if process == gatewayProcess {
		g := newGatewayCluster(b, bin)
		start = func(o devOptions) devProcess { return startGateway(b, bin, g, o) }
	}
	runs := 1
	if v := os.Getenv("PROXY_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 20 {
			b.Fatalf("PROXY_RUNS=%q: want a whole number from 1 to 20", v)
		}
		runs = n
	}
	var all [][]column
	var notes []string
	for run := range runs {
		if runs > 1 {
			fmt.Fprintf(os.Stderr, "bench-proxy: run %d of %d\n", run+1, runs)
		}
		var cols []column
		cols, notes = proxyRun(b, start, up)
		all = append(all, cols)
		fmt.Printf("\n%s\n\n%s\n", proxyHeader(up, process), formatTable(cols))
	}
	if runs > 1 {
		fmt.Printf("\nOver %d runs, min–median–max:\n\n%s\n", runs, formatSummary(all))
	}
	for _, n := range notes {
		fmt.Println(n)
	}
}

// The processes BenchmarkProxy can measure (PROXY_PROCESS).
const (
	devProcessName = "dev"     // tollgate dev: the default
	gatewayProcess = "gateway" // tollgate gateway against an etcd of its own
)

// proxyProcessOf reads PROXY_PROCESS; empty is dev.
func proxyProcessOf(v string) (string, error) {
	switch v {
	case "", devProcessName:
		return devProcessName, nil
	case gatewayProcess:
		return gatewayProcess, nil
	}
	return "", fmt.Errorf("PROXY_PROCESS=%q: want %s or %s", v, devProcessName, gatewayProcess)
}

// proxyRun measures every column once: the bare upstream, then each of
// proxyGateways' gateways, started afresh with start and stopped after
// its columns.
func proxyRun(b *testing.B, start func(devOptions) devProcess, up *upstream) (cols []column, notes []string) {
	b.Helper()
	bare := measureColumn(b, "bare", httpClient, endpoint{base: up.URL + "/v1", model: upstreamModel}, 0)
	cols = []column{bare}

	if dataTmpfs, _ := isTmpfs(os.TempDir()); dataTmpfs {
		notes = append(notes, fmt.Sprintf("Note: %s is on a tmpfs, so the \"disk\" journal is not on a disk (set TMPDIR to a directory on one).", os.TempDir()))
	}
	shm, err := isTmpfs("/dev/shm")
	if !shm {
		why := "/dev/shm is not a tmpfs"
		if err != nil {
			why = err.Error()
		}
		notes = append(notes, "Journal on tmpfs: skipped: "+why+".")
	}
	for _, g := range proxyGateways(shm) {
		dev := start(devOptions{journalParent: g.parent, args: append([]string{"--vllm", "mock=" + up.URL}, g.args...),
			env: strings.Fields(os.Getenv("PROXY_GATEWAY_ENV"))})
		for _, target := range g.targets {
			for _, kind := range target.kinds {
				name := target.columnName(kind)
				before := up.chats.Load()
				c := measureColumn(b, name, kind, endpoint{base: dev.base, grpc: dev.grpc, key: proxyKey, model: target.model}, dev.pid)
				reached := up.chats.Load() - before
				switch {
				case strings.HasPrefix(target.model, "mock/") && reached < int64(c.answered):
					b.Errorf("%s: %d requests answered, %d reached the upstream", name, c.answered, reached)
				case strings.HasPrefix(target.model, "builtin/") && reached != 0:
					b.Errorf("%s: %d requests reached the upstream", name, reached)
				}
				cols = append(cols, c)
			}
		}
		dev.stop()
	}

	return cols, notes
}

// proxyKey is the seed's key with RPM and no TPD (test/testdata/seed.yaml).
const proxyKey = "tgk_test_acme_rpm_only"

// The load of each column.
const (
	warmFor        = time.Second // a closed loop at closedConns first, unmeasured
	seqRequests    = 2000        // sequential plain requests (at most seqFor)
	streamRequests = 1000        // sequential streamed requests (at most seqFor)
	seqFor         = 5 * time.Second
	openFor        = 5 * time.Second // each open-loop rate
	closedConns    = 32
	closedFor      = 5 * time.Second
	settle         = 250 * time.Millisecond // a pause between phases
)

var openRates = []int{500, 1000, 2000}

// measureColumn runs every measure against ep as kind reaches it; pid,
// when not 0, is the process whose CPU and memory are read.
func measureColumn(b *testing.B, name string, kind clientKind, ep endpoint, pid int) column {
	b.Helper()
	r, err := kind.dial(ep)
	if err != nil {
		b.Fatal(err)
	}
	defer r.close()
	fmt.Fprintf(os.Stderr, "bench-proxy: %s…\n", name)
	c := column{name: name}

	if _, errs, _ := closedLoop(closedConns, warmFor, r.plain); errs > 0 {
		// A target that fails from the start is misconfigured: say why.
		b.Fatalf("%s: %d errors while warming up, e.g. %v", name, errs, r.plain())
	}
	for range 100 {
		_, _ = r.streamed()
	}
	var before procSample
	if pid != 0 {
		if before, err = readProc(pid); err != nil {
			b.Fatal(err)
		}
	}
	sent := 0
	count := func(lat []time.Duration, errs int) {
		sent += len(lat) + errs
		c.answered += len(lat)
	}

	time.Sleep(settle)
	lat, errs := sequential(seqRequests, seqFor, timed(r.plain))
	count(lat, errs)
	slices.Sort(lat)
	c.seq = latency{p50: quantile(lat, 0.5), errors: errs}

	time.Sleep(settle)
	lat, errs = sequential(streamRequests, seqFor, r.streamed)
	count(lat, errs)
	slices.Sort(lat)
	c.ttfb = latency{p50: quantile(lat, 0.5), errors: errs}

	var lag []time.Duration
	for _, rate := range openRates {
		time.Sleep(settle)
		n := rate * int(openFor/time.Second)
		var run openRun
		onPreciseThread(func() { run = openLoop(preciseClock{}, n, time.Second/time.Duration(rate), maxConns, r.plain) })
		count(run.lat, run.errors)
		slices.Sort(run.lat)
		c.open = append(c.open, openStats{rate: rate, sent: n, errors: run.errors, heldBack: run.heldBack,
			p50: quantile(run.lat, 0.5), p99: quantile(run.lat, 0.99), max: quantile(run.lat, 1)})
		lag = append(lag, run.lag...)
	}
	slices.Sort(lag)
	c.lag = [2]time.Duration{quantile(lag, 0.5), quantile(lag, 0.99)}

	time.Sleep(settle)
	ok, errs, elapsed := closedLoop(closedConns, closedFor, r.plain)
	sent += ok + errs
	c.answered += ok
	c.closed = closedStats{rate: float64(ok) / elapsed.Seconds(), errors: errs}

	if pid != 0 {
		after, err := readProc(pid)
		if err != nil {
			b.Fatal(err)
		}
		c.cpu, c.rss = cpuPerRequest(before, after, sent), after.rss
	}
	return c
}

// proxyHeader says what was measured, when, on what; process is
// proxyProcessOf's.
func proxyHeader(up *upstream, process string) string {
	commit := "unknown"
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		commit = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			commit += " with uncommitted changes"
		}
	}
	measured := "tollgate dev (its embedded etcd included)"
	if process == gatewayProcess {
		measured = "tollgate gateway alone (etcd in the benchmark's process; no portal, no central plane)"
	}
	if env := os.Getenv("PROXY_GATEWAY_ENV"); env != "" {
		measured += ", its environment with " + env
	}
	return fmt.Sprintf(`make bench-proxy: %s, commit %s, %s %s/%s, %d CPUs, GOMAXPROCS %d
  measured process (CPU, RSS): %s
  bare:             the instant upstream alone (vllmfake's bytes: a %d-byte reply; streamed, %d chunks, a usage chunk and [DONE])
  journal on disk:  tollgate %s --vllm mock=<upstream>, key with RPM and no TPD, default policy, audit journal in the data directory
  journal on tmpfs: the same with --audit-journal-dir on /dev/shm (not durable)
  builtin, …:       the same gateway, model builtin/echo (no upstream); "heads %s": a gateway with --head-interval %s
  (+N): added over bare. Open loop: a request every 1/rate s for %s on its own goroutine, latency from its scheduled start;
  sender lag: how late the sender woke for them; held back: requests due when %d were in flight, sent late.
  Closed loop: %d requests in flight for %s. One HTTP client, keep-alive, on the same machine.`,
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), commit, runtime.Version(), runtime.GOOS, runtime.GOARCH,
		runtime.NumCPU(), runtime.GOMAXPROCS(0), measured, len(up.plain), len(up.events)-2, process, headsFast, headsFast,
		openFor, maxConns, closedConns, closedFor)
}
