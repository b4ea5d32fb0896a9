package diskcheck

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/audit/syncload"
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
	if _, err := Run(ctx, Options{Dir: dir, Events: 100}); !errors.Is(err, ErrInterrupted) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want ErrInterrupted by context.Canceled", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// stall makes a call that blocks until unstall, whatever its context
// says, as an fdatasync does on a disk that stopped answering; entered is
// closed once it was called. unstall lets it return and waits for the run
// that called it to end; the test's cleanup calls it too.
func stall(t *testing.T) (block func(), entered <-chan struct{}, unstall func()) {
	in, release := make(chan struct{}), make(chan struct{})
	var enter, leave sync.Once
	unstall = func() {
		leave.Do(func() { close(release) })
		measuring.Wait()
	}
	t.Cleanup(unstall)
	return func() {
		enter.Do(func() { close(in) })
		<-release
	}, in, unstall
}

// TestRunInterruptedOnAStalledDisk: an interrupt while a stage waits on a
// disk that does not answer returns ErrInterrupted, without waiting for
// that stage, and names the directory it leaves; once the stage returns
// the directory is removed after all.
func TestRunInterruptedOnAStalledDisk(t *testing.T) {
	for _, c := range []struct {
		stage   string
		replace func(block func())
	}{
		{"disk flush", func(block func()) {
			syncsStage = func(context.Context, string, int) ([]time.Duration, error) { block(); return nil, nil }
		}},
		{"commit floor", func(block func()) {
			floorStage = func(context.Context, string, []time.Duration, int) (syncload.Result, error) {
				block()
				return syncload.Result{}, nil
			}
		}},
		{"audit step", func(block func()) {
			appendStage = func(context.Context, string, []time.Duration, *Report) error { block(); return nil }
		}},
	} {
		t.Run(c.stage, func(t *testing.T) {
			syncs, floor, appends := syncsStage, floorStage, appendStage
			t.Cleanup(func() { syncsStage, floorStage, appendStage = syncs, floor, appends })
			dir := t.TempDir()
			block, entered, unstall := stall(t) // its cleanup runs before TempDir's
			c.replace(block)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type outcome struct {
				rep Report
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				rep, err := Run(ctx, Options{Dir: dir, Events: 100})
				done <- outcome{rep, err}
			}()
			<-entered
			cancel()
			var o outcome
			select {
			case o = <-done:
			case <-time.After(time.Minute): // a hang guard, not a timing
				t.Fatal("Run still waits for the stalled stage a minute after its context ended")
			}
			left, _ := os.ReadDir(dir)
			if len(left) != 1 {
				t.Fatalf("%d directories in %s, want the run's", len(left), dir)
			}
			scratch := filepath.Join(dir, left[0].Name())
			if !errors.Is(o.err, ErrInterrupted) || !errors.Is(o.err, context.Canceled) || !strings.Contains(o.err.Error(), scratch+" may be left behind") {
				t.Fatalf("Run = %v, want ErrInterrupted naming %s", o.err, scratch)
			}
			if o.rep.Options.Dir != dir || o.rep.Append.N != 0 {
				t.Fatalf("report %+v", o.rep)
			}
			// Once the stage returns, the run removes its directory.
			unstall()
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Fatalf("left behind once the stage returned: %v", left)
			}
		})
	}
}

// TestRunInterruptedMidStage: on a disk that answers, an interrupt while a
// stage runs waits for that stage to return and removes the directory
// before Run returns ErrInterrupted, with the stages measured until then.
func TestRunInterruptedMidStage(t *testing.T) {
	saved := floorStage
	t.Cleanup(func() { floorStage = saved })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	floorStage = func(ctx context.Context, dir string, at []time.Duration, recordSize int) (syncload.Result, error) {
		cancel()
		return syncload.Floor(ctx, dir, at, recordSize)
	}
	dir := t.TempDir()
	rep, err := Run(ctx, Options{Dir: dir, Events: 100})
	if !errors.Is(err, ErrInterrupted) || strings.Contains(err.Error(), "left behind") {
		t.Fatalf("Run = %v, want ErrInterrupted with nothing left behind", err)
	}
	if rep.Syncs.N != 100 {
		t.Fatalf("report %+v, want the disk flush measured", rep)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}
