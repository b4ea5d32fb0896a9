package limits

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"
)

// health tracks whether etcd answers. While it does not, a gateway admits
// only from the slices it holds and refuses everything else at once.
type health struct {
	log    *slog.Logger
	notify func(up bool) // may be nil
	down   atomic.Bool
	reason atomic.Pointer[string]
	lastOK atomic.Int64 // real time (Unix ns) of the last etcd answer
}

// observe records the outcome of one etcd call. A call cancelled by the
// limiter's own shutdown says nothing about etcd.
func (h *health) observe(err error) {
	if err == nil {
		h.lastOK.Store(time.Now().UnixNano())
		if h.down.CompareAndSwap(true, false) {
			h.log.Info("limits: etcd reachable again; granting slices")
			if h.notify != nil {
				h.notify(true)
			}
		}
		return
	}
	if errors.Is(err, context.Canceled) {
		return
	}
	msg := "limits: etcd unreachable since " + time.Now().UTC().Format(time.RFC3339) + " (" + err.Error() + "); admitting only from held slices"
	if h.down.CompareAndSwap(false, true) {
		h.reason.Store(&msg)
		h.log.Warn("limits: degraded, admitting only from held slices", "err", err)
		if h.notify != nil {
			h.notify(false)
		}
	}
}

// isDown reports the degraded state; one atomic load.
func (h *health) isDown() bool { return h.down.Load() }

// sinceOK is the real time since etcd last answered.
func (h *health) sinceOK() time.Duration {
	return time.Since(time.Unix(0, h.lastOK.Load()))
}

// Healthy reports false with the reason while etcd is unreachable; the
// limiter then admits only from held slices and refuses the rest with
// ErrUnavailable. It recovers by itself once etcd answers again (Run
// probes it).
func (l *Limiter) Healthy() (bool, string) {
	if l.health.isDown() {
		if p := l.health.reason.Load(); p != nil {
			return false, *p
		}
		return false, "limits: etcd unreachable"
	}
	if l.stopped.Load() {
		return false, "limits: stopped"
	}
	return true, "ok"
}

// probe asks etcd for a linearizable read, which needs a quorum.
func (l *Limiter) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.GrantTimeout)
	defer cancel()
	l.healthReads.Add(1)
	_, err := l.cli.Get(ctx, probeKey, clientv3CountOnly)
	l.health.observe(err)
	if err != nil {
		return wrapUnavailable("probe", err)
	}
	return nil
}
