// Package forward is the appliance side of the central plane: it publishes
// every signed head of the appliance's audit log, with the leaves that
// head adds, to the central plane's CentralAuditService, storing and
// forwarding. Collect copies each new head and its leaves from the log
// into a queue on disk (bbolt) in one transaction; Flush sends the queue in
// order, deleting an item only once the central plane has stored it. While
// the central plane is unreachable the queue grows and Run retries with
// exponential backoff; nothing is lost (an item leaves the queue only when
// stored, or refused for good), and a resend after a crash is the same
// head with the same leaves, which the central plane recognises. Backlog
// reports what is waiting, and Metrics exports it to Prometheus.
package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/audit/head"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/central/centralclient"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
)

// Source is what the forwarder reads of the appliance's audit log;
// *auditlog.Log implements it.
type Source interface {
	// Days returns, oldest first, the days with events from day from on.
	Days(from string) ([]string, error)
	// Tenants returns the tenants with a tree on day.
	Tenants(day string) ([]string, error)
	// HeadsFrom returns the signed heads of a tree from the from-th on,
	// oldest first.
	HeadsFrom(tenant, day string, from uint64) ([]head.Head, error)
	// Leaves returns a tree's leaves with sequence in (afterSeq, toSeq].
	Leaves(tenant, day string, afterSeq, toSeq uint64) ([]auditlog.LeafRef, error)
}

var _ Source = (*auditlog.Log)(nil)

// Defaults of Options.
const (
	DefaultPollInterval = 5 * time.Second
	DefaultMinBackoff   = time.Second
	DefaultMaxBackoff   = 5 * time.Minute
	// DefaultUploadTimeout bounds one upload, from opening its stream to
	// the central plane's answer: the plane receives an upload within its
	// --ingest-max-upload-time (10 minutes by default) or ends it, then
	// verifies and stores it, which takes the largest upload (4 Mi
	// leaves, at some 33,000 leaves/s) about two minutes more. Past it the
	// upload is abandoned and the head retried with backoff, so that a
	// connection that went silent (the plane lost power, a link drops
	// packets) holds up the queue for at most that long.
	DefaultUploadTimeout = 15 * time.Minute
)

// Keepalive is the keepalive of the forwarder's connection to the central
// plane, centralclient.Keepalive: it finds a dead link within a minute
// and 20 s instead of the upload timeout.
var Keepalive = centralclient.Keepalive

// Options configure a Forwarder.
type Options struct {
	// Path is the queue file (bbolt), created if needed.
	Path   string
	Source Source
	// Client publishes to the central plane (an mTLS connection with the
	// appliance certificate).
	Client centralv1.CentralAuditServiceClient
	// LeafRetentionDays is the appliance's body retention, in days, sent
	// with every head. The central plane no longer prunes leaves by it
	// (it keeps them as long as the heads); older planes did.
	LeafRetentionDays int
	// PollInterval is how often Run looks for new heads.
	PollInterval time.Duration
	// MinBackoff and MaxBackoff bound the wait between failed sends.
	MinBackoff, MaxBackoff time.Duration
	// UploadTimeout bounds each upload, from opening its stream to the
	// central plane's answer (0: DefaultUploadTimeout). An upload not
	// answered by then fails like an unreachable plane: the head stays
	// queued and is sent again after the backoff.
	UploadTimeout time.Duration
	Logger        *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// After returns a channel that receives once d has passed; Run waits
	// on it between rounds (nil: time.After). Tests pass a channel they
	// control, to see every wait Run chooses and end it at once.
	After func(d time.Duration) <-chan time.Time
	// OnStored, when set, is called once the central plane has stored a
	// queued head (or already held it) and the head has left the queue.
	OnStored func(head.Head)
	// MaxRefused bounds the refused heads kept in the queue file, the
	// oldest dropped first (0: DefaultMaxRefused). Each was logged as an
	// error and counted when refused.
	MaxRefused int
}

// DefaultMaxRefused is how many refused heads the queue keeps.
const DefaultMaxRefused = 1000

// RetentionDays is the leaf retention to send for a body retention: whole
// days, rounded up, so that a central plane that prunes leaves by it (an
// older one) keeps them at least as long as the appliance keeps bodies
// (at least 1).
func RetentionDays(bodies time.Duration) int {
	const day = 24 * time.Hour
	return max(1, int((bodies+day-1)/day))
}

// Forwarder publishes heads to the central plane. Its methods are safe for
// concurrent use; Collect and Flush each run one at a time.
type Forwarder struct {
	opts      Options
	db        *bolt.DB
	collectMu sync.Mutex
	flushMu   sync.Mutex
	stats     stats
}

// Open opens (creating if needed) the queue at opts.Path.
func Open(opts Options) (*Forwarder, error) {
	if opts.Source == nil || opts.Client == nil || opts.Path == "" {
		return nil, errors.New("forward: a source, a client and a queue path are required")
	}
	if opts.LeafRetentionDays < 1 {
		return nil, fmt.Errorf("forward: leaf retention of %d days; want at least 1", opts.LeafRetentionDays)
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(DefaultMaxBackoff, opts.MinBackoff)
	}
	if opts.MaxRefused <= 0 {
		opts.MaxRefused = DefaultMaxRefused
	}
	if opts.UploadTimeout <= 0 {
		opts.UploadTimeout = DefaultUploadTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.After == nil {
		opts.After = time.After
	}
	if err := os.MkdirAll(filepath.Dir(opts.Path), 0o700); err != nil {
		return nil, fmt.Errorf("forward: %w", err)
	}
	db, err := bolt.Open(opts.Path, 0o600, &bolt.Options{Timeout: 5 * time.Second, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, fmt.Errorf("forward: open %s: %w", opts.Path, err)
	}
	if err := initQueue(db); err != nil {
		_ = db.Close()
		return nil, err
	}
	return &Forwarder{opts: opts, db: db}, nil
}

// Close closes the queue. Stop Run first.
func (f *Forwarder) Close() error {
	if err := f.db.Close(); err != nil {
		return fmt.Errorf("forward: close: %w", err)
	}
	return nil
}

// Run collects and flushes every poll interval until ctx ends; after a
// failed send it waits with exponential backoff instead: the k-th failure
// in a row waits a random time in [b/2, b], b = MinBackoff·2^(k-1) capped
// at MaxBackoff (the jitter spreads a fleet's retries after an outage).
// Errors are logged, never fatal: the queue keeps what could not be sent,
// and each failure logs the backlog.
func (f *Forwarder) Run(ctx context.Context) error {
	backoff := time.Duration(0)
	for {
		if _, err := f.Collect(ctx); err != nil && ctx.Err() == nil {
			f.opts.Logger.Error("central forwarder: reading the audit log failed", "err", err)
		}
		wait := f.opts.PollInterval
		if err := f.Flush(ctx); err != nil && ctx.Err() == nil {
			backoff = nextBackoff(backoff, f.opts.MinBackoff, f.opts.MaxBackoff)
			wait = backoff/2 + rand.N(backoff/2+1)
			b := f.Backlog()
			f.opts.Logger.Warn("central forwarder: central plane unreachable; heads stay queued",
				"err", err, "retry_in", wait.Round(time.Millisecond).String(), "backlog_heads", b.Heads, "backlog_leaves", b.Leaves,
				"backlog_oldest", b.Oldest)
		} else {
			backoff = 0
		}
		select {
		case <-ctx.Done():
			return nil
		case <-f.opts.After(wait):
		}
	}
}

// nextBackoff doubles the backoff bound, from lo up to hi.
func nextBackoff(prev, lo, hi time.Duration) time.Duration {
	return min(max(2*prev, lo), hi)
}
