package keys

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Cache is a gateway's in-memory view of every key, kept in step with etcd
// by a watch so that authenticating a request reads no etcd. Changes written
// anywhere reach it within the watch latency (milliseconds). Expiry is not
// watch-driven: it is checked against the clock on every call.
type Cache struct {
	cli *clientv3.Client
	now func() time.Time
	log *slog.Logger

	view      atomic.Pointer[view]
	ready     chan struct{}
	readyOnce sync.Once

	// entries by etcd key; owned by Run.
	entries map[string]*entry

	// Retry delays after etcd fails, and the bound of one load.
	minBackoff, maxBackoff, loadTimeout time.Duration
	// retrying, when set, is told each wait before a reload (tests).
	retrying func(wait time.Duration)
}

// NewCache returns an empty cache over cli; Run fills it, and until its
// first load every secret is refused. now is the clock expiry is checked
// against (nil means time.Now); logger nil means slog.Default().
func NewCache(cli *clientv3.Client, now func() time.Time, logger *slog.Logger) *Cache {
	if now == nil {
		now = time.Now
	}
	if logger == nil {
		logger = slog.Default()
	}
	c := &Cache{
		cli:         cli,
		now:         now,
		log:         logger,
		ready:       make(chan struct{}),
		minBackoff:  100 * time.Millisecond,
		maxBackoff:  5 * time.Second,
		loadTimeout: 10 * time.Second,
	}
	c.view.Store(buildView(nil, logger))
	return c
}

// Ready is closed once the first load has completed.
func (c *Cache) Ready() <-chan struct{} { return c.ready }

// Authenticate resolves a secret to its key's Principal. Every refusal —
// unknown, revoked or expired at now() — is ErrUnauthorized. It reads only
// memory, takes no lock and does not allocate.
func (c *Cache) Authenticate(secret string) (*Principal, error) {
	e := c.lookup(secret)
	if e == nil {
		return nil, ErrUnauthorized
	}
	return e.principal, nil
}

// lookup returns the entry that secret authenticates, or nil.
func (c *Cache) lookup(secret string) *entry {
	h := HashSecret(secret)
	e := c.view.Load().byHash[h]
	// The map is keyed by the hash already; the constant-time compare keeps
	// the final check free of early exits whatever the map does.
	if e == nil || !hashesEqual(&e.hash, &h) || e.principal.ExpiredAt(c.now()) {
		return nil
	}
	return e
}

// Principal returns the Principal of a tenant's key if the key is known,
// not revoked and not expired.
func (c *Cache) Principal(tenantID, keyID string) (*Principal, bool) {
	e := c.view.Load().byRef[keyRef{tenantID, keyID}]
	if e == nil || e.record.revoked() || e.principal.ExpiredAt(c.now()) {
		return nil, false
	}
	return e.principal, true
}

// Run keeps the cache in step with etcd until ctx is done, then returns
// ctx.Err(). It loads every key with one read at revision R, then watches
// from R+1. When the watch breaks (etcd compacted past it, lost its leader,
// or went away) it reloads and watches again, backing off while etcd stays
// unreachable; meanwhile the last view keeps serving. Call Run once.
func (c *Cache) Run(ctx context.Context) error {
	delay := c.minBackoff
	for {
		rev, err := c.load(ctx)
		if err == nil {
			c.readyOnce.Do(func() { close(c.ready) })
			start := c.now()
			var progressed bool
			progressed, err = c.watch(ctx, rev+1)
			// A watch that delivered something, or ran a while, was
			// healthy: its end starts the backoff afresh. A quiet key
			// space can keep a watch silent for hours, and each end of
			// one (a leader change, a reconnect) must not lengthen the
			// next blind spot, in which a revocation goes unseen.
			if progressed || c.now().Sub(start) >= c.maxBackoff {
				delay = c.minBackoff
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := delay/2 + rand.N(delay/2+1)
		if c.retrying != nil {
			c.retrying(wait)
		}
		c.log.Warn("key cache out of step with etcd; serving the last view and reloading",
			slog.Any("err", err), slog.Duration("retry_in", wait))
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
		delay = min(2*delay, c.maxBackoff)
	}
}

// load replaces the view with every record in etcd and returns the revision
// it read at.
func (c *Cache) load(ctx context.Context) (int64, error) {
	lctx, cancel := context.WithTimeout(ctx, c.loadTimeout)
	defer cancel()
	resp, err := c.cli.Get(lctx, recordPrefix, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("load keys: %w", err)
	}
	c.entries = make(map[string]*entry, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		c.put(kv.Key, kv.Value)
	}
	c.publish()
	c.log.Info("key cache loaded", slog.Int("keys", len(c.entries)), slog.Int64("revision", resp.Header.Revision))
	return resp.Header.Revision, nil
}

// watch applies changes from revision from on until the watch fails or ctx
// is done. progressed reports whether any response arrived.
func (c *Cache) watch(ctx context.Context, from int64) (progressed bool, err error) {
	// Require a leader, so that a member cut off from the cluster ends the
	// watch instead of silently delivering nothing.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range c.cli.Watch(wctx, recordPrefix, clientv3.WithPrefix(), clientv3.WithRev(from)) {
		if err := resp.Err(); err != nil {
			return progressed, fmt.Errorf("watch keys from revision %d: %w", from, err)
		}
		progressed = true
		if len(resp.Events) == 0 {
			continue
		}
		for _, ev := range resp.Events {
			switch ev.Type {
			case clientv3.EventTypePut:
				c.put(ev.Kv.Key, ev.Kv.Value)
			case clientv3.EventTypeDelete:
				delete(c.entries, string(ev.Kv.Key))
			}
		}
		c.publish()
		from = resp.Header.Revision + 1
	}
	return progressed, errors.New("key watch closed")
}

// put stores the entry of a record. A record that does not decode is
// dropped (and logged), so a damaged record fails closed.
func (c *Cache) put(key, value []byte) {
	r, err := decodeRecord(value)
	var e *entry
	if err == nil {
		e, err = newEntry(r)
	}
	if err != nil {
		delete(c.entries, string(key))
		c.log.Error("ignoring key record", slog.String("etcd_key", string(key)), slog.Any("err", err))
		return
	}
	c.entries[string(key)] = e
}

// publish makes the current entries the view readers see.
func (c *Cache) publish() { c.view.Store(buildView(c.entries, c.log)) }
