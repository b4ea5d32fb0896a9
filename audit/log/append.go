package log

import (
	"context"
	"fmt"
	"time"
)

// Append records ev and returns once it is durably on disk (fsynced), with
// its place in the log. Concurrent calls share one commit. A call whose ctx
// cannot end (its Done is nil) and that finds the log idle commits on its
// own goroutine, without a hand-off (inline.go).
//
// ctx bounds only the wait: if it ends before ev is queued, ev is not
// recorded; if it ends later, ev may still be recorded. Callers recording a
// request whose client went away should pass a context that outlives it
// (context.WithoutCancel), which also lets the call commit inline.
// Append fails with ErrDuplicate for a request id already recorded, and with
// ErrFailed after a failed commit, and at once with ErrDiskFull while the
// disk is full.
func (l *Log) Append(ctx context.Context, ev Event) (Receipt, error) {
	start := time.Now()
	defer func() { l.appendSeconds.Observe(time.Since(start).Seconds()) }()
	if err := l.fullErr(); err != nil {
		return Receipt{}, err
	}
	p, err := l.prepare(ev)
	if err != nil {
		return Receipt{}, err
	}
	inline := false
	if ctx.Done() == nil {
		if inline, err = l.tryInline(p); err != nil {
			return Receipt{}, err
		}
	}
	if !inline {
		if err := l.enqueue(ctx, p); err != nil {
			return Receipt{}, err
		}
	}
	select {
	case <-p.done:
		if p.err == nil {
			p.receipt.signed, p.receipt.index = p.batch, p.batchIndex
			if l.starts != nil {
				l.starts.finished(ev.RequestID)
			}
		}
		return p.receipt, p.err
	case <-ctx.Done():
		return Receipt{}, fmt.Errorf("audit log: %s: %w (the event may still be recorded)", ev.RequestID, ctx.Err())
	}
}

// enqueue hands p to the committer, waiting while the queue is full.
func (l *Log) enqueue(ctx context.Context, p *pending) error {
	l.closeMu.RLock()
	defer l.closeMu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	select {
	case l.queue <- p:
		return nil
	default:
	}
	if l.stats.queueFull.Add(1)&1023 == 1 {
		l.opts.Logger.Warn("audit log: append queue full; appends wait for the committer",
			"queue_size", cap(l.queue), "waits", l.stats.queueFull.Load())
	}
	select {
	case l.queue <- p:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("audit log: %s not recorded: queue full: %w", p.requestID, ctx.Err())
	}
}
