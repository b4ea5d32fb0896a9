package syncload

import (
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

// Run calls do(i) for each arrival at[i], on a goroutine of its own, and
// returns how long each call took (in the order they ended) and how long
// all took from the first arrival. A late driver does not skip arrivals:
// calls it could not start on time start at once.
func Run(at []time.Duration, do func(i int)) ([]time.Duration, time.Duration) {
	var (
		mu  sync.Mutex
		all = make([]time.Duration, 0, len(at))
		wg  sync.WaitGroup
	)
	start := time.Now()
	for i := range at {
		if wait := time.Until(start.Add(at[i])); wait > 0 {
			time.Sleep(wait)
		}
		wg.Go(func() {
			t0 := time.Now()
			do(i)
			d := time.Since(t0)
			mu.Lock()
			all = append(all, d)
			mu.Unlock()
		})
	}
	wg.Wait()
	return all, time.Since(start)
}
