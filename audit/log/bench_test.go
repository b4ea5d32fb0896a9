package log

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/audit/leaf"
)

// Bodies of a typical chat completion: ~1 KiB in, ~2 KiB out.
var (
	benchRequest  = bytes.Repeat([]byte(`{"role":"user","content":"abcdefgh"}`), 28)
	benchResponse = bytes.Repeat([]byte(`data: {"choices":[{"delta":{"content":"xy"}}]}`), 44)
)

func benchEvent(n uint64) Event {
	tenant := [...]string{"acme", "globex", "initech", "umbrella"}[n%4]
	return Event{
		RequestID: fmt.Sprintf("req_b%012d", n), TenantID: tenant, KeyID: "key_" + tenant,
		Time: day1, Endpoint: "/v1/chat/completions", Model: "builtin/echo", Status: 200,
		PromptTokens: 120, CompletionTokens: 240, PolicyDecisionID: "dec_0123456789abcdef0123456789abcdef",
		RequestBody: benchRequest, ResponseBody: benchResponse,
	}
}

func benchLog(b *testing.B, opts Options) *Log {
	b.Helper()
	opts.Signer, opts.Now = newTestPKI(b, "app_bench").app, func() time.Time { return day1 }
	l, err := Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	return l
}

// latencies collects per-append latencies from many goroutines.
type latencies struct {
	mu  sync.Mutex
	all []time.Duration
}

func (s *latencies) add(d []time.Duration) {
	s.mu.Lock()
	s.all = append(s.all, d...)
	s.mu.Unlock()
}

func (s *latencies) report(b *testing.B, elapsed time.Duration, l *Log) {
	b.ReportMetric(float64(len(s.all))/elapsed.Seconds(), "events/s")
	s.reportPercentiles(b)
	st := l.Stats()
	b.ReportMetric(float64(st.Events)/float64(max(st.Commits, 1)), "events/commit")
}

// reportPercentiles reports the p50 and p99 latencies.
func (s *latencies) reportPercentiles(b *testing.B) {
	slices.Sort(s.all)
	q := func(p float64) float64 {
		return float64(s.all[int(p*float64(len(s.all)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

// BenchmarkAppend measures durable appends (real fsync) under saturation:
// W concurrent writers (in-flight requests) appending back to back.
func BenchmarkAppend(b *testing.B) {
	for _, writers := range []int{64, 256} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			l := benchLog(b, Options{})
			var next atomic.Int64
			var lat latencies
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for range writers {
				wg.Go(func() {
					var mine []time.Duration
					for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
						ev := benchEvent(uint64(i))
						t0 := time.Now()
						if _, err := l.Append(context.Background(), ev); err != nil {
							b.Error(err)
							return
						}
						mine = append(mine, time.Since(t0))
					}
					lat.add(mine)
				})
			}
			wg.Wait()
			lat.report(b, time.Since(start), l)
		})
	}
}

// BenchmarkAppendPaced measures what the audit step adds to a request at a
// steady load below saturation: appends arrive at a fixed rate, each on
// its own goroutine, as requests finishing on an appliance would; evenly
// spaced, or as a Poisson process (requests finish independently, so they
// bunch: closer to what a gateway sees). The syncs=2 variants let two
// journal syncs overlap, for comparison.
func BenchmarkAppendPaced(b *testing.B) {
	for _, c := range []struct {
		rate, syncs int
		poisson     bool
	}{{1000, 0, false}, {1000, 0, true}, {5000, 0, false}, {5000, 0, true}, {20000, 0, false}, {5000, 2, false}, {20000, 2, false}} {
		name := fmt.Sprintf("rate=%d", c.rate)
		if c.poisson {
			name += ",poisson"
		}
		if c.syncs != 0 {
			name += fmt.Sprintf(",syncs=%d", c.syncs)
		}
		b.Run(name, func(b *testing.B) {
			l := benchLog(b, Options{MaxSyncsInFlight: c.syncs})
			lat, elapsed := paced(b, c.rate, c.poisson, func(i int) {
				if _, err := l.Append(context.Background(), benchEvent(uint64(i))); err != nil {
					b.Error(err)
				}
			})
			lat.report(b, elapsed, l)
		})
	}
}

// paced calls do(i) for i in [0, b.N), each on its own goroutine at its
// arrival time (see arrivals), and returns how long each call took and
// the time all took.
func paced(b *testing.B, rate int, poisson bool, do func(i int)) (*latencies, time.Duration) {
	var lat latencies
	var wg sync.WaitGroup
	at := arrivals(b.N, rate, poisson)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if wait := time.Until(start.Add(at[i])); wait > 0 {
			time.Sleep(wait)
		}
		wg.Go(func() {
			t0 := time.Now()
			do(i)
			lat.add([]time.Duration{time.Since(t0)})
		})
	}
	wg.Wait()
	return &lat, time.Since(start)
}

// arrivals returns n arrival times (offsets from the start) at rate per
// second: evenly spaced, or a Poisson process (exponential gaps, seeded,
// so runs offer the same load).
func arrivals(n, rate int, poisson bool) []time.Duration {
	mean := float64(time.Second) / float64(rate)
	rng := rand.New(rand.NewPCG(1, 2))
	at := make([]time.Duration, n)
	var t float64
	for i := range at {
		at[i] = time.Duration(t)
		if poisson {
			t += rng.ExpFloat64() * mean
		} else {
			t += mean
		}
	}
	return at
}

// BenchmarkGroupCommitFloor is the least any durable group commit can
// cost on this disk at a paced load: the same arrivals as
// BenchmarkAppendPaced, each appending ~3 KiB, one goroutine writing
// whatever is queued to an already zero-filled file and calling fdatasync,
// then waking the batch. No leaf, no index, no zero-fill or bbolt beside
// it: what Append adds over this is the log's own cost.
func BenchmarkGroupCommitFloor(b *testing.B) {
	for _, c := range []struct {
		rate    int
		poisson bool
	}{{1000, false}, {1000, true}, {5000, false}, {5000, true}} {
		name := fmt.Sprintf("rate=%d", c.rate)
		if c.poisson {
			name += ",poisson"
		}
		b.Run(name, func(b *testing.B) {
			const size = 3 << 10
			f, err := os.Create(filepath.Join(b.TempDir(), "floor"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate(0); err != nil {
				b.Fatal(err)
			}
			zero := make([]byte, 1<<20)
			for off := int64(0); off < int64(b.N)*size; off += int64(len(zero)) {
				if _, err := f.WriteAt(zero, off); err != nil {
					b.Fatal(err)
				}
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			type waiter struct{ done chan struct{} }
			queue := make(chan waiter, b.N)
			go func() {
				rec := make([]byte, size)
				var off int64
				for w := range queue {
					batch := []waiter{w}
				drain:
					for {
						select {
						case x, ok := <-queue:
							if !ok {
								break drain
							}
							batch = append(batch, x)
						default:
							break drain
						}
					}
					for range batch {
						if _, err := f.WriteAt(rec, off); err != nil {
							b.Error(err)
						}
						off += size
					}
					if err := fdatasync(f); err != nil {
						b.Error(err)
					}
					for _, w := range batch {
						close(w.done)
					}
				}
			}()
			defer close(queue)
			lat, _ := paced(b, c.rate, c.poisson, func(int) {
				w := waiter{done: make(chan struct{})}
				queue <- w
				<-w.done
			})
			lat.reportPercentiles(b)
		})
	}
}

// BenchmarkFdatasync is the floor under any durable append on this disk:
// a 4 KiB write and fdatasync, one at a time, in the benchmark's directory.
func BenchmarkFdatasync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "probe"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	page := make([]byte, 4096)
	all := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		if _, err := f.WriteAt(page, int64(i)*4096); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		all = append(all, time.Since(t0))
	}
	slices.Sort(all)
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkLeaves measures what the central plane's forwarder reads per
// head: one tenant's leaves between two heads, out of a day of four
// tenants' interleaved events.
func BenchmarkLeaves(b *testing.B) {
	l := benchLog(b, Options{})
	const events = 40000
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1); i <= events; i = next.Add(1) {
				if _, err := l.Append(context.Background(), benchEvent(uint64(i))); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ResetTimer()
	for b.Loop() {
		// The last 10,000 sequences: ~2,500 leaves of the tenant.
		leaves, err := l.Leaves("acme", "2026-03-01", events-10000, events)
		if err != nil || len(leaves) < 2000 {
			b.Fatalf("%d leaves, %v", len(leaves), err)
		}
	}
}

// BenchmarkApplyRound measures one applier round: n journaled events of
// four tenants (batches of 8, as at a few thousand events/s) stored in
// audit.db in one bbolt transaction, commit included. Each round is a
// fresh day, so its trees start empty, in a database that grows across
// rounds as the appliance's does.
func BenchmarkApplyRound(b *testing.B) {
	for _, n := range []int{1024, 8192} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			l := benchLog(b, Options{})
			leafBytes := bytes.Repeat([]byte("x"), 600)
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				jobs := applyJobs(day1.AddDate(0, 0, 1+i).Format("2006-01-02"), n, leafBytes)
				a := newApplier(time.Hour)
				b.StartTimer()
				if err := l.db.Update(func(tx *bolt.Tx) error { return a.applyTx(tx, jobs) }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/round")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
		})
	}
}

// applyJobs returns n journaled events of day as the committer hands
// them to the applier, eight per batch.
func applyJobs(day string, n int, leafBytes []byte) []batchJob {
	tenants := [...]string{"acme", "globex", "initech", "umbrella"}
	sizes := map[string]uint64{}
	var jobs []batchJob
	for i := range n {
		if i%8 == 0 {
			jobs = append(jobs, batchJob{day: day})
		}
		j := &jobs[len(jobs)-1]
		tenant := tenants[i%len(tenants)]
		seq := uint64(i + 1)
		j.entries = append(j.entries, entry{tenant: tenant, requestID: fmt.Appendf(nil, "req_%s_%08d", day, i),
			seq: seq, leafIndex: sizes[tenant], leaf: leafBytes, leafHash: leaf.Hash(fmt.Appendf(nil, "%d", seq)),
			bodyOff: seq * 3000, reqLen: 1000, respLen: 2000})
		sizes[tenant]++
		j.end, j.lastSeq = seq*3000+3000, seq
	}
	return jobs
}
