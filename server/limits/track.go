package limits

import (
	"context"
	"sync/atomic"
)

// tracker counts background operations (grants, prefetches, charges) so
// shutdown can let them land before giving everything back, and tests can
// await them instead of sleeping. add and done do not allocate.
type tracker struct {
	n    atomic.Int64
	zero chan struct{} // capacity 1: a token each time n drops to 0
}

func newTracker() *tracker { return &tracker{zero: make(chan struct{}, 1)} }

func (t *tracker) add() { t.n.Add(1) }

func (t *tracker) done() {
	if t.n.Add(-1) == 0 {
		select {
		case t.zero <- struct{}{}:
		default: // a token is already waiting
		}
	}
}

// wait returns when no operation is in flight, or when ctx ends. One
// caller at a time.
func (t *tracker) wait(ctx context.Context) error {
	for t.n.Load() != 0 {
		select {
		case <-t.zero:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
