package diskcheck

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestOptionsRefused(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opts Options
		want string
	}{
		{"no directory", Options{}, "directory is required"},
		{"missing directory", Options{Dir: filepath.Join(dir, "missing")}, "no such file"},
		{"a file", Options{Dir: file}, "not a directory"},
		{"too few events", Options{Dir: dir, Events: 99}, "events 99"},
		{"too many events", Options{Dir: dir, Events: MaxEvents + 1}, "events"},
		{"negative rate", Options{Dir: dir, Rate: -1}, "rate -1"},
		{"rate too high", Options{Dir: dir, Rate: MaxRate + 1}, "rate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Run(context.Background(), c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run = %v, want an error containing %q", err, c.want)
			}
		})
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Fatalf("refused runs wrote to the directory: %v", left)
	}
}

// TestRun: every stage measures every event, the log committed them all,
// and nothing is left in the directory.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	rep, err := Run(context.Background(), Options{Dir: dir, Events: 400, Rate: 8000})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Syncs.N != 400 || rep.Floor.N != 400 || rep.Append.N != 400 {
		t.Fatalf("measured %d syncs, %d floor and %d appends, want 400 each", rep.Syncs.N, rep.Floor.N, rep.Append.N)
	}
	if rep.Options.Dir != dir || rep.Options.Rate != 8000 || rep.Options.Even {
		t.Fatalf("report options %+v", rep.Options)
	}
	for name, s := range map[string]struct{ p50, p99, p999, max time.Duration }{
		"syncs":  {rep.Syncs.P50, rep.Syncs.P99, rep.Syncs.P999, rep.Syncs.Max},
		"floor":  {rep.Floor.P50, rep.Floor.P99, rep.Floor.P999, rep.Floor.Max},
		"append": {rep.Append.P50, rep.Append.P99, rep.Append.P999, rep.Append.Max},
	} {
		if s.p50 <= 0 || s.p50 > s.p99 || s.p99 > s.p999 || s.p999 > s.max {
			t.Errorf("%s percentiles out of order: %+v", name, s)
		}
	}
	if rep.EventsPerCommit < 1 || rep.EventsPerSecond <= 0 {
		t.Fatalf("%.1f events per commit, %.0f events/s", rep.EventsPerCommit, rep.EventsPerSecond)
	}
	if !rep.Within(rep.Append.P99) || rep.Within(rep.Append.P99-1) {
		t.Fatalf("Within is not p99 ≤ budget (p99 %v)", rep.Append.P99)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

func TestRunEndsWithItsContext(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, Options{Dir: dir, Events: 100}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}
