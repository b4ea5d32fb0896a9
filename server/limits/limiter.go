package limits

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tollgate-dev/tollgate/server/keys"
)

// ErrUnavailable means etcd could not be reached (or the limiter has
// stopped) and the slices this gateway holds do not cover the request. The
// edge answers 503; the limiter never falls back to admitting without the
// shared counters.
var ErrUnavailable = errors.New("limits: etcd unreachable and no held slice covers the request")

var (
	errDegraded = fmt.Errorf("%w (degraded: refusing at once until etcd answers)", ErrUnavailable)
	errStopped  = fmt.Errorf("%w (limiter stopped)", ErrUnavailable)
)

// Limiter admits requests against the RPM and TPD limits of virtual keys.
// It is safe for concurrent use; Run must run for prefetching, idle
// returns, health probes and the final return of slices.
type Limiter struct {
	cli *clientv3.Client
	cfg Config
	now func() time.Time
	log *slog.Logger

	keys     sync.Map // keyRef → *keyState
	counters sync.Map // counter key of a current window → *keyState, for the watch
	jobs     chan job // prefetches for Run's workers
	bg       *tracker
	health   health

	running atomic.Bool // Run's workers take jobs
	stopped atomic.Bool // Run is stopping: misses are refused
	// gate orders background work started from requests (grants,
	// prefetches) before Run's stop: they start under its read lock after
	// checking running or stopped, which Run changes under its write lock,
	// so that none starts after Run has begun waiting for them.
	gate        sync.RWMutex
	txns        atomic.Int64
	healthReads atomic.Int64 // probes and watch revision reads

	watching  chan struct{} // closed once the watch knows where it starts
	watchOnce sync.Once

	leaseMu sync.Mutex
	leases  map[int64]clientv3.LeaseID // window end (Unix s) → lease

	// settleRetrying, when set, is told of each failed charge that
	// settleWindow tries again (tests).
	settleRetrying func(attempt int)
}

type keyRef struct{ tenantID, keyID string }

// New returns a Limiter that keeps its counters in etcd through cli. Call
// Run.
func New(cli *clientv3.Client, cfg Config) *Limiter {
	cfg = cfg.withDefaults()
	log := cfg.Logger.With(slog.String("gateway", cfg.GatewayID))
	l := &Limiter{
		cli:      cli,
		cfg:      cfg,
		now:      cfg.Now,
		log:      log,
		jobs:     make(chan job, 1024),
		bg:       newTracker(),
		watching: make(chan struct{}),
		leases:   map[int64]clientv3.LeaseID{},
	}
	l.health.log, l.health.notify = log, cfg.healthChanged
	l.health.lastOK.Store(time.Now().UnixNano())
	return l
}

// Transactions reports the etcd round trips for keys' limits (counter
// transactions and reads, lease grants) made so far.
func (l *Limiter) Transactions() int64 { return l.txns.Load() }

// HealthReads reports the etcd reads made to check etcd itself so far:
// Run's probes (while degraded, or when idle for IdleProbe) and the
// revision reads of a starting or restarting watch. They run on real-time timers, so
// they are counted apart from Transactions, which follows the requests.
func (l *Limiter) HealthReads() int64 { return l.healthReads.Load() }

// state returns the key's state, creating it on first use. No allocation
// once the key is known.
func (l *Limiter) state(p *keys.Principal) *keyState {
	ref := keyRef{p.TenantID, p.KeyID}
	if ks, ok := l.keys.Load(ref); ok {
		return ks.(*keyState)
	}
	ks, _ := l.keys.LoadOrStore(ref, newKeyState(p.TenantID, p.KeyID))
	return ks.(*keyState)
}

// lockState returns key p's live state, locked, and the current time,
// with both buckets rolled to it.
func (l *Limiter) lockState(p *keys.Principal) (*keyState, time.Time) {
	for {
		ks := l.state(p)
		now := l.now()
		ks.mu.Lock()
		if !ks.dead {
			l.roll(ks, &ks.rpm, now)
			l.roll(ks, &ks.tpd, now)
			return ks, now
		}
		ks.mu.Unlock()
	}
}

// evict forgets ks if it holds nothing, has nothing in flight and has
// been idle since before cutoff. An Admit that still holds the pointer
// sees dead and looks the key up again. An etcd operation in flight (its
// slot taken) keeps the key: a balance takes a debt out of local while it
// charges it, and puts it back if the charge fails, which on a forgotten
// state would never be charged.
func (l *Limiter) evict(ks *keyState, cutoff time.Time) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	for _, b := range []*bucket{&ks.rpm, &ks.tpd} {
		if b.local != 0 || b.returning != 0 || len(b.sem) != 0 || b.call != nil || b.queued || b.charging || b.waiting != 0 ||
			!b.lastUse.Before(cutoff) {
			return
		}
	}
	ks.dead = true
	l.keys.CompareAndDelete(keyRef{ks.tenantID, ks.keyID}, ks)
	l.counters.CompareAndDelete(ks.rpm.ref.key, ks)
	l.counters.CompareAndDelete(ks.tpd.ref.key, ks)
}
