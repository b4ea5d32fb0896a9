package syncload

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestArrivalsEven(t *testing.T) {
	got := Arrivals(5, 1000, false)
	want := []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 4 * time.Millisecond}
	if !slices.Equal(got, want) {
		t.Fatalf("Arrivals = %v, want %v", got, want)
	}
}

// TestArrivalsPoisson: the same seeded load every time, in order, at the
// asked rate on average.
func TestArrivalsPoisson(t *testing.T) {
	const n, rate = 100000, 2000
	a, b := Arrivals(n, rate, true), Arrivals(n, rate, true)
	if !slices.Equal(a, b) {
		t.Fatal("two Poisson loads differ")
	}
	if !slices.IsSorted(a) || a[0] != 0 {
		t.Fatalf("arrivals not increasing from 0: %v…", a[:3])
	}
	if slices.Equal(a[:100], Arrivals(100, rate, false)) {
		t.Fatal("Poisson arrivals are evenly spaced")
	}
	mean := float64(a[n-1]) / float64(n-1)
	if want := float64(time.Second) / rate; mean < 0.97*want || mean > 1.03*want {
		t.Fatalf("mean gap %.0f ns, want about %.0f", mean, want)
	}
}

func TestSummarize(t *testing.T) {
	d := make([]time.Duration, 1000)
	for i := range d {
		d[i] = time.Duration(1000-i) * time.Millisecond // reversed: Summarize sorts
	}
	got := Summarize(d)
	want := Summary{N: 1000, P50: 500 * time.Millisecond, P99: 990 * time.Millisecond, P999: 999 * time.Millisecond, Max: time.Second}
	if got != want {
		t.Fatalf("Summarize = %+v, want %+v", got, want)
	}
	if got := Summarize(nil); got != (Summary{}) {
		t.Fatalf("Summarize(nil) = %+v", got)
	}
}

// TestRunCallsEachOnceNotBeforeItsArrival: every arrival gets its call,
// never before its time, and its latency is returned.
func TestRunCallsEachOnceNotBeforeItsArrival(t *testing.T) {
	at := Arrivals(200, 20000, true)
	var mu sync.Mutex
	calls := make(map[int]int)
	start := time.Now()
	early := make(chan int, len(at))
	res := Run(context.Background(), at, func(i int) {
		if since := time.Since(start); since < at[i] {
			early <- i
		}
		mu.Lock()
		calls[i]++
		mu.Unlock()
	})
	close(early)
	for i := range early {
		t.Errorf("call %d ran before its arrival at %v", i, at[i])
	}
	if len(res.Latencies) != len(at) || len(calls) != len(at) {
		t.Fatalf("%d latencies, %d distinct calls, want %d", len(res.Latencies), len(calls), len(at))
	}
	for i, n := range calls {
		if n != 1 {
			t.Errorf("call %d ran %d times", i, n)
		}
	}
	if res.Elapsed < at[len(at)-1] {
		t.Fatalf("elapsed %v before the last arrival %v", res.Elapsed, at[len(at)-1])
	}
}

// TestRunBoundsCallsInFlight: with every call held, Run starts no more
// than MaxInFlight; the arrivals it had to hold back are counted late.
func TestRunBoundsCallsInFlight(t *testing.T) {
	const extra = 10
	at := make([]time.Duration, MaxInFlight+extra) // all due at once
	var (
		mu       sync.Mutex
		inFlight int
		most     int
		full     = make(chan struct{})
		fullOnce sync.Once
		release  = make(chan struct{})
	)
	go func() {
		<-full
		// The held-back arrivals are now due for longer than lateAfter
		// by the time a slot frees: this sleep makes them late, it
		// does not wait for anything.
		time.Sleep(2 * lateAfter)
		close(release)
	}()
	res := Run(context.Background(), at, func(int) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		if inFlight == MaxInFlight {
			fullOnce.Do(func() { close(full) })
		}
		mu.Unlock()
		<-release
		mu.Lock()
		inFlight--
		mu.Unlock()
	})
	if most != MaxInFlight {
		t.Fatalf("%d calls in flight at most, want %d", most, MaxInFlight)
	}
	if len(res.Latencies) != len(at) {
		t.Fatalf("%d latencies, want %d", len(res.Latencies), len(at))
	}
	if res.Late < extra {
		t.Fatalf("%d calls counted late, want at least the %d held back", res.Late, extra)
	}
}

// TestFloorAndSyncs: each arrival and each sync is measured, and the
// files they wrote are gone afterwards.
func TestFloorAndSyncs(t *testing.T) {
	dir := t.TempDir()
	at := Arrivals(300, 10000, true)
	floor, err := Floor(context.Background(), dir, at, 3<<10)
	if err != nil {
		t.Fatal(err)
	}
	syncs, err := Syncs(context.Background(), dir, 20)
	if err != nil {
		t.Fatal(err)
	}
	if len(floor.Latencies) != len(at) || len(syncs) != 20 {
		t.Fatalf("%d floor latencies (want %d), %d syncs (want 20)", len(floor.Latencies), len(at), len(syncs))
	}
	for _, d := range append(floor.Latencies, syncs...) {
		if d <= 0 {
			t.Fatalf("latency %v", d)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

func TestFloorAndSyncsNeedTheDirectory(t *testing.T) {
	missing := t.TempDir() + "/missing"
	if _, err := Floor(context.Background(), missing, Arrivals(10, 1000, false), 3<<10); err == nil {
		t.Error("Floor in a missing directory succeeded")
	}
	if _, err := Syncs(context.Background(), missing, 10); err == nil {
		t.Error("Syncs in a missing directory succeeded")
	}
}

// TestRunStopsWithItsContext: once the context ends no call starts, even
// one already due, and Run returns what the started ones took.
func TestRunStopsWithItsContext(t *testing.T) {
	at := make([]time.Duration, 20)
	for i := 10; i < len(at); i++ {
		at[i] = time.Hour // never reached: the context ends first
	}
	ctx, cancel := context.WithCancel(context.Background())
	var started atomic.Int64
	res := Run(ctx, at, func(i int) {
		if started.Add(1) == 10 {
			cancel()
		}
	})
	if n := started.Load(); n != 10 || len(res.Latencies) != 10 {
		t.Fatalf("%d calls started, %d latencies: want 10 of each", n, len(res.Latencies))
	}
}

// TestRunStartsNothingOnceItsContextEnded: not even arrivals already due
// with slots free.
func TestRunStartsNothingOnceItsContextEnded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var started atomic.Int64
	for range 50 {
		Run(ctx, make([]time.Duration, 100), func(int) { started.Add(1) })
	}
	if n := started.Load(); n != 0 {
		t.Fatalf("%d calls started after the context ended", n)
	}
	if got, err := Syncs(ctx, t.TempDir(), 10); !errors.Is(err, context.Canceled) || len(got) != 0 {
		t.Fatalf("Syncs after the context ended: %d syncs, %v", len(got), err)
	}
	// Nor does Floor zero-fill its file (64 MiB here) first.
	dir := t.TempDir()
	if _, err := Floor(ctx, dir, make([]time.Duration, 1<<14), 4<<10); !errors.Is(err, context.Canceled) {
		t.Fatalf("Floor after the context ended: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}
