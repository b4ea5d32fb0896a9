package perf_test

import (
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
				base, metrics, tlsCfg := startDev(b, bin, withTLS)
				measurePaced(b, base+"/chat/completions", tlsCfg, rate,
					func() map[string]bucketCounts { return scrapedHistograms(b, metrics) })
			})
		}
	}
}

func buildTollgate(b *testing.B) string {
	b.Helper()
	bin, err := tollgatetest.Build(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	return bin
}

// journalDirEnv names a directory in which the benchmark puts the audit
// journal (--audit-journal-dir, a new directory inside it per run), to
// compare disks: a second disk, or a tmpfs to see the log's own cost
// without any disk (not durable; for measurement only).
const journalDirEnv = "TOLLGATE_BENCH_JOURNAL_DIR"

// startDev runs `tollgate dev` with the test seed (the same keys and
// limits as startTarget's), the default policy bundle, no central plane
// and metrics on, the gateway over TLS when withTLS; it returns the base
// URL (…/v1), the metrics URL and the clients' TLS configuration (nil
// without TLS). It is stopped with SIGTERM when the benchmark ends.
func startDev(b *testing.B, bin string, withTLS bool) (base, metrics string, clientTLS *tls.Config) {
	b.Helper()
	args := []string{"dev", "--data", b.TempDir(), "--seed", "../testdata/seed.yaml",
		"--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--portal-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
		"--central-addr", "", "--log-level", "warn"}
	if withTLS {
		var certFile, keyFile string
		certFile, keyFile, clientTLS = selfSigned(b)
		args = append(args, "--gateway-tls-cert", certFile, "--gateway-tls-key", keyFile)
	}
	if parent := os.Getenv(journalDirEnv); parent != "" {
		dir, err := os.MkdirTemp(parent, "journal-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = os.RemoveAll(dir) })
		args = append(args, "--audit-journal-dir", dir)
	}
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				b.Errorf("tollgate dev: %v", err)
			}
		case <-time.After(time.Minute): // a hang guard, not a timing
			_ = cmd.Process.Kill()
			b.Errorf("tollgate dev did not stop within a minute of SIGTERM")
		}
	})
	addrs, err := tollgatetest.Banner(stdout, "Base URL", "Metrics")
	if err != nil {
		b.Fatalf("tollgate dev: %v", err)
	}
	return addrs["Base URL"], addrs["Metrics"], clientTLS
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key,
// and returns their files and a client configuration trusting it.
func selfSigned(b *testing.B) (certFile, keyFile string, clientTLS *tls.Config) {
	b.Helper()
	dir := b.TempDir()
	certFile, keyFile = filepath.Join(dir, "gateway.pem"), filepath.Join(dir, "gateway-key.pem")
	certPEM, err := tlsconf.WriteSelfSigned(certFile, keyFile, "127.0.0.1")
	if err != nil {
		b.Fatal(err)
	}
	pool, err := tlsconf.Pool(certPEM)
	if err != nil {
		b.Fatal(err)
	}
	return certFile, keyFile, &tls.Config{RootCAs: pool}
}
