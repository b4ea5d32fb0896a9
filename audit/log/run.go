package log

import (
	"context"
	"errors"
	"time"
)

// Run publishes heads every interval until ctx ends: SignHeads (a head for
// every tree that grew, and final heads for days that closed) and Prune. It
// publishes once at start, which finalizes days that closed while the
// appliance was down, and once more when ctx ends. Cancel Run before Close.
//
// Once the log has failed (ErrFailed) Run returns that error at once: the
// log refuses every append until reopened, so the process running it
// should stop and be restarted, which recovers from the journal (as
// PostgreSQL does after a failed fsync).
func (l *Log) Run(ctx context.Context, interval time.Duration) error {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	return l.RunTicks(ctx, ticker.C)
}

// RunTicks is Run driven by ticks instead of a ticker (tests send ticks by
// hand); the tick values are ignored, the log's clock dates the heads.
func (l *Log) RunTicks(ctx context.Context, ticks <-chan time.Time) error {
	l.publish()
	for {
		select {
		case <-ctx.Done():
			l.publish()
			return nil
		case <-l.failedCh:
			return l.failure()
		case <-ticks:
			l.publish()
		}
	}
}

// publish signs heads and prunes bodies, logging failures: a failed round is
// retried at the next tick.
func (l *Log) publish() {
	now := l.opts.Now()
	heads, err := l.SignHeads(now)
	switch {
	case errors.Is(err, ErrNoSigner):
	case err != nil:
		l.opts.Logger.Error("audit log: signing heads failed", "err", err)
	case len(heads) > 0:
		l.opts.Logger.Debug("audit log: heads signed", "heads", len(heads))
	}
	if _, err := l.Prune(now); err != nil {
		l.opts.Logger.Error("audit log: pruning failed", "err", err)
	}
}
