package limits

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// errRolled ends a grant whose window ended while it ran; its waiters look
// again in the new window.
var errRolled = errors.New("limits: window ended during the grant")

// grantCall is one grant in flight for a bucket; requests that miss while
// it runs wait for it instead of starting their own.
type grantCall struct {
	done  chan struct{}
	least int64
	got   int64 // set before done is closed
	err   error
}

// job is a prefetch for Run's workers.
type job struct {
	ks    *keyState
	kind  kind
	limit int64
}

// joinGrant returns the grant in flight for b or starts one for at least
// need units. ks.mu is held.
func (l *Limiter) joinGrant(ks *keyState, b *bucket, limit, need int64) *grantCall {
	if b.call != nil {
		return b.call
	}
	call := &grantCall{done: make(chan struct{}), least: need}
	b.call = call
	l.bg.add()
	go func() {
		defer l.bg.done()
		l.runGrant(ks, b, limit, call)
	}()
	return call
}

// maybePrefetch queues a background grant when b's slice runs low, so the
// hit path rarely waits. It does not allocate. ks.mu is held.
func (l *Limiter) maybePrefetch(ks *keyState, b *bucket, limit int64) {
	if b.queued || b.call != nil || b.local > b.lastSlice/l.cfg.PrefetchBelow ||
		!l.running.Load() || l.health.isDown() || !b.shortAt.IsZero() || l.holdsBack(b, limit, l.now()) {
		return
	}
	l.gate.RLock()
	defer l.gate.RUnlock()
	if !l.running.Load() { // Run began stopping since the check above
		return
	}
	b.queued = true
	l.bg.add()
	select {
	case l.jobs <- job{ks: ks, kind: b.kind, limit: limit}:
	default:
		b.queued = false
		l.bg.done()
	}
}

// holdsBack reports whether a prefetch of b's next slice would leave a
// window of requests per minute fewer than FairShare units; see prefetch.
// ks.mu is held.
func (l *Limiter) holdsBack(b *bucket, limit int64, now time.Time) bool {
	return b.kind == rpm && limit-b.ref.val-l.sliceSize(b, limit, 1, now) < l.cfg.FairShare
}

// prefetch runs a queued prefetch unless it is no longer needed, or, for
// requests per minute, would leave the window fewer than FairShare units
// (as far as the watch has shown): those last units go one at a time to
// requests that ask, so that none is held by a gateway whose requests
// have just stopped while another gateway's are refused. Tokens are not
// held back so: a day's last tokens are many, and an idle gateway's go
// back within IdleAfter.
func (l *Limiter) prefetch(j job) {
	defer l.bg.done()
	ks, b := j.ks, j.ks.bucket(j.kind)
	ks.mu.Lock()
	b.queued = false
	now := l.now()
	l.roll(ks, b, now)
	if b.call != nil || l.health.isDown() || b.local > b.lastSlice/l.cfg.PrefetchBelow || l.holdsBack(b, j.limit, now) {
		ks.mu.Unlock()
		return
	}
	call := &grantCall{done: make(chan struct{}), least: 1}
	b.call = call
	ks.mu.Unlock()
	l.runGrant(ks, b, j.limit, call)
}

// runGrant performs call under the limiter's own deadline, so a request
// that stops waiting neither cancels the grant nor makes it look like an
// outage; what it brings lands in the slice for the next request.
func (l *Limiter) runGrant(ks *keyState, b *bucket, limit int64, call *grantCall) {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.GrantTimeout)
	defer cancel()
	got, err := l.grant(ctx, ks, b, limit, call.least)
	ks.mu.Lock()
	call.got, call.err = got, err
	b.call = nil
	ks.mu.Unlock()
	close(call.done)
}

// grant takes a slice for b from etcd and adds it to the held units. It
// returns 0 (and marks the window short) when not even least fits.
func (l *Limiter) grant(ctx context.Context, ks *keyState, b *bucket, limit, least int64) (int64, error) {
	if err := b.acquire(ctx); err != nil {
		return 0, fmt.Errorf("%w: waiting for another etcd operation on the key: %w", ErrUnavailable, err)
	}
	defer b.release(ks)
	now := l.now()
	ks.mu.Lock()
	l.roll(ks, b, now)
	ref := b.ref
	want := l.sliceSize(b, limit, least, now)
	ks.mu.Unlock()

	got, err := l.takeUnits(ctx, &ref, limit, want, least)

	ks.mu.Lock()
	if b.ref.key != ref.key {
		// The window ended meanwhile: the units belong to a window that
		// is over. A past day's tokens go back so its counter stays equal
		// to its usage; a past minute's requests do not matter.
		ks.mu.Unlock()
		if got > 0 && b.kind == tpd {
			if gerr := l.giveUnits(ctx, &ref, got); gerr != nil {
				l.log.Warn("limits: returning a slice of a past day failed", "key_id", ks.keyID, "tokens", got, "err", gerr)
			}
		}
		if err != nil {
			return 0, err
		}
		return 0, errRolled
	}
	defer ks.mu.Unlock()
	b.see(ref)
	if err != nil {
		return 0, err
	}
	if got == 0 {
		b.shortAt, b.shortOf, b.shortLimit = now, limit-b.ref.val, limit
		return 0, nil
	}
	b.local += got
	b.lastSlice, b.grantLimit = got, limit
	b.shortAt, b.shortOf = time.Time{}, 0
	return got, nil
}
