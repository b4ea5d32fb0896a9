package syncload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/tollgate-dev/tollgate/internal/durable"
)

// Floor is the least a durable group commit costs on the disk holding
// dir at the arrivals at: each arrival queues a record of recordSize
// bytes and waits; one goroutine writes whatever is queued to a file
// already zero-filled (and synced) for all of them, calls fdatasync once,
// and wakes the batch. Nothing else runs: no encoding, index or tree. A
// durable log on that disk adds at least this much at those arrivals.
//
// The file is created in dir and removed afterwards. Once ctx ends the
// zero-fill stops (up to ~300 MiB at syncload's largest loads) and no
// arrival is offered (see Run).
func Floor(ctx context.Context, dir string, at []time.Duration, recordSize int) (_ Result, err error) {
	f, err := os.CreateTemp(dir, "syncload-floor-*")
	if err != nil {
		return Result{}, fmt.Errorf("syncload: %w", err)
	}
	defer func() {
		err = errors.Join(err, f.Close(), os.Remove(f.Name()))
	}()
	if err := prefill(ctx, f, int64(len(at))*int64(recordSize)); err != nil {
		return Result{}, err
	}
	type waiter struct{ done chan struct{} }
	queue := make(chan waiter, min(len(at), MaxInFlight))
	var syncErr error // written by the committer, read after Run's calls returned
	go func() {
		rec := make([]byte, recordSize)
		var off int64
		for w := range queue {
			batch := []waiter{w}
		drain:
			for {
				select {
				case x := <-queue:
					batch = append(batch, x)
				default:
					break drain
				}
			}
			for range batch {
				if _, err := f.WriteAt(rec, off); err != nil && syncErr == nil {
					syncErr = err
				}
				off += int64(recordSize)
			}
			if err := durable.DataSync(f); err != nil && syncErr == nil {
				syncErr = err
			}
			for _, w := range batch {
				close(w.done)
			}
		}
	}()
	res := Run(ctx, at, func(int) {
		w := waiter{done: make(chan struct{})}
		queue <- w
		<-w.done
	})
	close(queue)
	if syncErr != nil {
		return Result{}, fmt.Errorf("syncload: floor: %w", syncErr)
	}
	return res, nil
}

// Syncs is the disk's own flush latency: n writes of one 4 KiB page, each
// appended to one new file in dir and followed by fdatasync, one at a
// time, until ctx ends. The file is removed afterwards.
func Syncs(ctx context.Context, dir string, n int) (latencies []time.Duration, err error) {
	f, err := os.CreateTemp(dir, "syncload-syncs-*")
	if err != nil {
		return nil, fmt.Errorf("syncload: %w", err)
	}
	defer func() {
		err = errors.Join(err, f.Close(), os.Remove(f.Name()))
	}()
	page := make([]byte, 4096)
	latencies = make([]time.Duration, 0, n)
	for i := range n {
		if err := ctx.Err(); err != nil {
			return latencies, err
		}
		t0 := time.Now()
		if _, err := f.WriteAt(page, int64(i)*int64(len(page))); err != nil {
			return nil, fmt.Errorf("syncload: %w", err)
		}
		if err := durable.DataSync(f); err != nil {
			return nil, fmt.Errorf("syncload: %w", err)
		}
		latencies = append(latencies, time.Since(t0))
	}
	return latencies, nil
}

// prefill writes size bytes of zeros to f and syncs them, so that the
// floor's writes overwrite allocated blocks, as the audit journal's do.
// It stops between megabytes once ctx ends.
func prefill(ctx context.Context, f *os.File, size int64) error {
	zero := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(zero)) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := f.WriteAt(zero, off); err != nil {
			return fmt.Errorf("syncload: zero-fill: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncload: zero-fill: %w", err)
	}
	return nil
}
