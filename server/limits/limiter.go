package limits

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tollgate-dev/tollgate/server/keys"
)

// Tunables, documented in docs/limits.md.
const (
	// horizon is how much of its own traffic a gateway asks for in one
	// slice: the admissions it expects in this time at its recent rate.
	horizon = 2 * time.Second
	// fairShare caps a slice at this fraction of the window's remaining
	// budget, so slices shrink geometrically as the budget runs out and
	// the last units go one at a time to whoever asks.
	fairShare = 4
	// idleAfter returns a slice to etcd when its key has had no request on
	// this gateway for this long, so an idle gateway does not starve a
	// busy one.
	idleAfter = time.Second
	// sweepEvery is how often idle slices are looked for.
	sweepEvery = 250 * time.Millisecond
	// leaseMargin keeps a window's counter this long after the window.
	leaseMargin = 10 * time.Minute
	// grantTimeout bounds one synchronous grant on the request path.
	grantTimeout = 2 * time.Second
)

// ErrUnavailable means etcd could not be reached and the slices this
// gateway holds do not cover the request. The edge answers 503; it never
// falls back to admitting without the shared counters.
var ErrUnavailable = errors.New("limits: etcd unreachable and no held allotment covers the request")

// Config configures a Limiter.
type Config struct {
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Limiter admits requests against the RPM and TPD limits of virtual keys.
type Limiter struct {
	cli  *clientv3.Client
	now  func() time.Time
	log  *slog.Logger
	keys sync.Map // keyRef → *keyState

	txns     atomic.Int64 // etcd round trips, for the txns-per-1000 figure
	degraded atomic.Pointer[string]
}

type keyRef struct{ tenantID, keyID string }

// New returns a Limiter over cli. Call Run to return idle slices and to
// give everything back at shutdown.
func New(cli *clientv3.Client, cfg Config) *Limiter {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Limiter{cli: cli, now: cfg.Now, log: cfg.Logger}
}

// Run returns idle slices to etcd until ctx ends, then returns everything
// this gateway still holds.
func (l *Limiter) Run(ctx context.Context) error {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			l.returnSlices(sctx, time.Time{})
			return nil
		case <-t.C:
			l.returnSlices(ctx, l.now().Add(-idleAfter))
		}
	}
}

// Transactions reports the etcd round trips made so far.
func (l *Limiter) Transactions() int64 { return l.txns.Load() }

// Healthy reports whether the last etcd operation succeeded; while it does
// not, requests are admitted only from held slices.
func (l *Limiter) Healthy() (bool, string) {
	if p := l.degraded.Load(); p != nil {
		return false, *p
	}
	return true, "ok"
}

func (l *Limiter) setHealth(err error) {
	if err == nil {
		if l.degraded.Load() != nil {
			l.degraded.Store(nil)
			l.log.Info("limits: etcd reachable again")
		}
		return
	}
	if errors.Is(err, context.Canceled) {
		return
	}
	msg := "etcd unreachable: " + err.Error()
	if l.degraded.Swap(&msg) == nil {
		l.log.Warn("limits: degraded, admitting only from held slices", "err", err)
	}
}

// state returns the key's state, creating it on first use.
func (l *Limiter) state(p *keys.Principal) *keyState {
	ref := keyRef{p.TenantID, p.KeyID}
	if ks, ok := l.keys.Load(ref); ok {
		return ks.(*keyState)
	}
	ks, _ := l.keys.LoadOrStore(ref, &keyState{tenantID: p.TenantID, keyID: p.KeyID})
	return ks.(*keyState)
}

// returnSlices gives back the slices of keys idle since before cutoff (all
// of them when cutoff is zero).
func (l *Limiter) returnSlices(ctx context.Context, cutoff time.Time) {
	now := l.now()
	l.keys.Range(func(_, v any) bool {
		ks := v.(*keyState)
		for _, b := range []*bucket{&ks.rpm, &ks.tpd} {
			ks.grantMu.Lock()
			ks.mu.Lock()
			n := int64(0)
			if b.local > 0 && (cutoff.IsZero() || b.lastUse.Before(cutoff)) && now.Before(b.ref.end) {
				n, b.local = b.local, 0
			}
			ref := b.ref
			ks.mu.Unlock()
			if n > 0 {
				if err := l.give(ctx, &ref, n); err != nil {
					l.log.Warn("limits: returning a slice failed; it is lost for this window", "key_id", ks.keyID, "units", n, "err", err)
				}
				ks.mu.Lock()
				if b.ref.key == ref.key {
					b.ref = ref
				}
				ks.mu.Unlock()
			}
			ks.grantMu.Unlock()
		}
		return true
	})
}
