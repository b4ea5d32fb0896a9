package syncload

import (
	"slices"
	"time"
)

// Summary is the distribution of a set of latencies.
type Summary struct {
	N                   int
	P50, P99, P999, Max time.Duration
}

// Summarize sorts d in place and reads its percentiles (nearest rank,
// rounded down); the zero Summary for none.
func Summarize(d []time.Duration) Summary {
	if len(d) == 0 {
		return Summary{}
	}
	slices.Sort(d)
	q := func(p float64) time.Duration { return d[int(p*float64(len(d)-1))] }
	return Summary{N: len(d), P50: q(0.50), P99: q(0.99), P999: q(0.999), Max: d[len(d)-1]}
}
