package perf_test

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

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
func BenchmarkAddedLatencyProcess(b *testing.B) {
	bin := buildTollgate(b)
	for _, rate := range []int{1000, 3000} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) {
			base, metrics := startDev(b, bin)
			measurePaced(b, base+"/chat/completions", rate,
				func() map[string]bucketCounts { return scrapedHistograms(b, metrics) })
		})
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
// and metrics on; it returns the base URL (…/v1) and the metrics URL. It
// is stopped with SIGTERM when the benchmark ends.
func startDev(b *testing.B, bin string) (base, metrics string) {
	b.Helper()
	args := []string{"dev", "--data", b.TempDir(), "--seed", "../testdata/seed.yaml",
		"--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--portal-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
		"--central-addr", "", "--log-level", "warn"}
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
	return addrs["Base URL"], addrs["Metrics"]
}
