package syncload

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// Arrivals returns n arrival times (offsets from the start) at rate per
// second: evenly spaced, or a Poisson process (exponential gaps from a
// fixed seed, so that runs offer the same load). Requests finish
// independently and bunch, so Poisson is closer to a gateway's appends.
func Arrivals(n, rate int, poisson bool) []time.Duration {
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

// MaxInFlight bounds the calls Run has running at once: a disk that
// stalls at a high rate would otherwise pile up a goroutine per arrival.
const MaxInFlight = 16384

// lateAfter is how far past its arrival a call may start and still count
// as on time: more than a sleeping driver oversleeps (a virtual machine's
// timers often wake it 1-2 ms late, which only bunches arrivals a little),
// less than a stall that changes the load.
const lateAfter = 5 * time.Millisecond

// Result is what Run measured.
type Result struct {
	// Latencies are how long each call took, in the order they ended.
	Latencies []time.Duration
	// Elapsed is the time from the first arrival until the last call
	// returned.
	Elapsed time.Duration
	// Late counts calls started more than 5 ms after their arrival
	// (MaxInFlight calls were running, or the driver was not scheduled
	// in time): the load was not offered as asked, and the latencies
	// understate the wait such arrivals would have had.
	Late int
}

// Run calls do(i) for each arrival at[i], on a goroutine of its own, at
// most MaxInFlight at once, and returns how long each call took. A late
// driver does not skip arrivals: calls it could not start on time start
// as soon as it can, and are counted in Result.Late. Once ctx ends no
// call starts; Run waits for those running and returns what they took.
func Run(ctx context.Context, at []time.Duration, do func(i int)) Result {
	var (
		mu   sync.Mutex
		all  = make([]time.Duration, 0, len(at))
		wg   sync.WaitGroup
		slot = make(chan struct{}, MaxInFlight)
		late int
	)
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
arrivals:
	for i := range at {
		if wait := time.Until(start.Add(at[i])); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				break arrivals
			}
		}
		if ctx.Err() != nil { // a select with a free slot too picks either
			break arrivals
		}
		select {
		case slot <- struct{}{}:
		case <-ctx.Done():
			break arrivals
		}
		if time.Since(start)-at[i] > lateAfter {
			late++
		}
		wg.Go(func() {
			defer func() { <-slot }()
			t0 := time.Now()
			do(i)
			d := time.Since(t0)
			mu.Lock()
			all = append(all, d)
			mu.Unlock()
		})
	}
	wg.Wait()
	return Result{Latencies: all, Elapsed: time.Since(start), Late: late}
}
