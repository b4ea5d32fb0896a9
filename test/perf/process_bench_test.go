package perf_test

import (
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/central/tlsconf"
	"github.com/tollgate-dev/tollgate/internal/tollgatetest"
)

// BenchmarkAddedLatencyProcess is the audited variant of
// BenchmarkAddedLatencyPaced against `tollgate dev` in a process of its
// own (built for the run), as a client on another machine meets it: the
// load generator no longer shares the gateway's Go scheduler, heap and
// collector, only the two cores. The audit step's percentiles are read
// from the process's /metrics.
//
//	go test -run '^$' -bench AddedLatencyProcess -benchtime 10000x ./test/perf/
//
// The tls variants serve the gateway over TLS (--gateway-tls-cert, a
// self-signed P-256 certificate), the clients' keep-alive connections
// opened before the measurement: what TLS adds to a request, handshakes
// aside.
func BenchmarkAddedLatencyProcess(b *testing.B) {
	bin := buildTollgate(b)
	for _, rate := range []int{1000, 3000} {
		for _, withTLS := range []bool{false, true} {
			name := fmt.Sprintf("rate=%d", rate)
			if withTLS {
				name += "/tls"
			}
			b.Run(name, func(b *testing.B) {
				dev := startDev(b, bin, devOptions{tls: withTLS, journalParent: os.Getenv(journalDirEnv)})
				measurePaced(b, dev.base+"/chat/completions", dev.clientTLS, rate,
					func() map[string]bucketCounts { return scrapedHistograms(b, dev.metrics) })
			})
		}
	}
}

func buildTollgate(tb testing.TB) string {
	tb.Helper()
	bin, err := tollgatetest.Build(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}

// journalDirEnv names a directory in which the benchmark puts the audit
// journal (--audit-journal-dir, a new directory inside it per run), to
// compare disks: a second disk, or a tmpfs to see the log's own cost
// without any disk (not durable; for measurement only).
const journalDirEnv = "TOLLGATE_BENCH_JOURNAL_DIR"

// devOptions are the variants of startDev's `tollgate dev`.
type devOptions struct {
	tls bool // serve the gateway over TLS
	// journalParent, when set, is a directory in which the audit journal
	// gets a new directory of its own (--audit-journal-dir); otherwise it
	// is in the data directory.
	journalParent string
	args          []string // more flags
	// data is the data directory; empty: a new temporary one.
	data string
	// env is added to the process's environment (NAME=value).
	env []string
}

// devProcess is a running `tollgate dev` or `tollgate gateway`.
type devProcess struct {
	base      string      // the gateway's base URL, …/v1
	grpc      string      // its gRPC address
	metrics   string      // its metrics URL
	clientTLS *tls.Config // the clients' TLS configuration; nil without TLS
	pid       int
	// stop ends it with SIGTERM and waits; it is also called when the
	// benchmark ends.
	stop func()
}

// startDev runs `tollgate dev` with the test seed (the same keys and
// limits as startTarget's), the default policy bundle, no central plane
// and metrics on, in a new data directory.
func startDev(tb testing.TB, bin string, o devOptions) devProcess {
	tb.Helper()
	data := o.data
	if data == "" {
		data = tb.TempDir()
	}
	args := []string{"dev", "--data", data, "--seed", "../testdata/seed.yaml",
		"--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--portal-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
		"--central-addr", "", "--log-level", "warn"}
	var clientTLS *tls.Config
	if o.tls {
		var certFile, keyFile string
		certFile, keyFile, clientTLS = selfSigned(tb)
		args = append(args, "--gateway-tls-cert", certFile, "--gateway-tls-key", keyFile)
	}
	args = append(args, journalArgs(tb, o.journalParent)...)
	args = append(args, o.args...)
	dev := startProcess(tb, bin, "tollgate dev", args, o.env)
	dev.clientTLS = clientTLS
	return dev
}

// journalArgs puts the audit journal in a new directory inside parent
// (--audit-journal-dir), removed when the benchmark ends; with no parent,
// none: the journal stays in the data directory.
func journalArgs(tb testing.TB, parent string) []string {
	tb.Helper()
	if parent == "" {
		return nil
	}
	dir, err := os.MkdirTemp(parent, "journal-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	return []string{"--audit-journal-dir", dir}
}

// startProcess runs bin with args (env added to its environment) until
// the benchmark ends, and reads the addresses its banner prints; what
// names it in errors.
func startProcess(tb testing.TB, bin, what string, args, env []string) devProcess {
	tb.Helper()
	var dev devProcess
	cmd := exec.Command(bin, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	var once sync.Once
	dev.pid = cmd.Process.Pid
	dev.stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					tb.Errorf("%s: %v", what, err)
				}
			case <-time.After(time.Minute): // a hang guard, not a timing
				_ = cmd.Process.Kill()
				tb.Errorf("%s did not stop within a minute of SIGTERM", what)
			}
		})
	}
	tb.Cleanup(dev.stop)
	addrs, err := tollgatetest.Banner(stdout, "Base URL", "gRPC", "Metrics")
	if err != nil {
		tb.Fatalf("%s: %v", what, err)
	}
	dev.base, dev.grpc, dev.metrics = addrs["Base URL"], addrs["gRPC"], addrs["Metrics"]
	return dev
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key,
// and returns their files and a client configuration trusting it.
func selfSigned(tb testing.TB) (certFile, keyFile string, clientTLS *tls.Config) {
	tb.Helper()
	dir := tb.TempDir()
	certFile, keyFile = filepath.Join(dir, "gateway.pem"), filepath.Join(dir, "gateway-key.pem")
	certPEM, err := tlsconf.WriteSelfSigned(certFile, keyFile, "127.0.0.1")
	if err != nil {
		tb.Fatal(err)
	}
	pool, err := tlsconf.Pool(certPEM)
	if err != nil {
		tb.Fatal(err)
	}
	return certFile, keyFile, &tls.Config{RootCAs: pool}
}
