package limits

import (
	"context"
	"sync"
	"time"
)

// keyState is one key's allotments on this gateway.
type keyState struct {
	tenantID, keyID string

	mu   sync.Mutex // guards the buckets' fields except sem
	dead bool       // evicted from Limiter.keys; look the key up again
	rpm  bucket
	tpd  bucket
}

func newKeyState(tenantID, keyID string) *keyState {
	ks := &keyState{tenantID: tenantID, keyID: keyID}
	ks.rpm = bucket{kind: rpm, sem: make(chan struct{}, 1)}
	ks.tpd = bucket{kind: tpd, sem: make(chan struct{}, 1)}
	return ks
}

func (ks *keyState) bucket(k kind) *bucket {
	if k == rpm {
		return &ks.rpm
	}
	return &ks.tpd
}

// bucket is this gateway's allotment of one key's budget of one kind, in
// the current window.
type bucket struct {
	kind kind
	// sem admits one etcd operation on the bucket's counters at a time, so
	// the cached counter stays current and concurrent misses share one
	// grant. Acquired with a context, never blocking past it.
	sem chan struct{}

	ref   counterRef // the current window's counter, as last seen
	local int64      // units held here, not yet admitted; < 0: usage to charge
	// deferred is the newest change of the counter the watch delivered
	// while this gateway's own operation on it was in flight. The
	// operation's answer moves the counter and local together; seen
	// alone, its own change would show the units twice, or not at all,
	// in the remaining of the x-ratelimit headers. It is seen when the
	// operation ends (release).
	deferred counterRef
	// returning is what a running balance took out of local to give back
	// (or, < 0, to charge), until its answer moves the counter.
	returning int64
	lastSlice int64 // size of the last grant
	// grantLimit is the limit the last grant was taken under. Units held
	// under a limit since lowered are given back (dropLowered).
	grantLimit int64
	lastUse    time.Time
	rate       rateMeter

	// shortAt is when etcd last showed the window unable to cover a
	// request: it then had shortOf units left.
	shortAt    time.Time
	shortOf    int64
	shortLimit int64 // the limit shortOf was measured against

	call     *grantCall // the grant in flight, if any
	waiting  int64      // requests waiting for call
	queued   bool       // a prefetch is queued
	charging bool       // a charge of usage above reservations is pending
}

// roll moves b to the window holding now. Units held for a past RPM
// window are dropped: that window is over. A past TPD window's balance is
// settled against its own counter in the background, so each day's
// counter ends equal to its usage. ks.mu is held.
func (l *Limiter) roll(ks *keyState, b *bucket, now time.Time) {
	if now.Before(b.ref.end) {
		return
	}
	old, leftover := b.ref, b.local
	_, end, name := window(b.kind, now)
	b.ref = counterRef{key: counterKey(ks.tenantID, ks.keyID, b.kind, name), end: end}
	l.counters.CompareAndDelete(old.key, ks)
	l.counters.Store(b.ref.key, ks)
	b.local = 0
	b.shortAt, b.shortOf = time.Time{}, 0
	if b.kind == tpd && leftover != 0 && old.key != "" {
		l.settleWindow(ks, old, leftover)
	}
}

// dropLowered gives back the units b holds when the key's limit is no
// longer the one they were granted under: the window's counter may then
// stand above the current limit, and admitting from units it already
// counts would exceed it. That holds for a raised limit too: other
// gateways may have taken the counter past a limit since lowered again,
// above this gateway's grant but below the counter (100, raised to 200,
// the counter taken to 190, lowered to 150), and this gateway may never
// have seen the raise. They go back in the background (settleWindow); the
// next grant asks etcd under the current limit, so a window already past
// it admits nothing more. grantLimit keeps the old limit until such a
// grant succeeds, so the unused part of a reservation admitted before
// (Settle puts it back in the slice) is given back too; once a grant
// under the new limit succeeded, the counter, which counts those tokens,
// was within it. A debt (local < 0) stays: it is usage to charge. ks.mu
// is held.
func (l *Limiter) dropLowered(ks *keyState, b *bucket, limit int64) {
	if b.local <= 0 || limit == b.grantLimit {
		return
	}
	n := b.local
	b.local = 0
	b.shortAt, b.shortOf = time.Time{}, 0
	l.log.Info("limits: key's limit changed; giving back the units held under the old one",
		"key_id", ks.keyID, "kind", b.kind.String(), "limit", limit, "units", n)
	l.settleWindow(ks, b.ref, n)
}

// knownShort reports whether etcd showed, less than Recheck ago and under
// the same limit, that the window cannot cover lack more units. ks.mu is
// held.
func (l *Limiter) knownShort(b *bucket, limit, lack int64, now time.Time) bool {
	return !b.shortAt.IsZero() && now.Sub(b.shortAt) < l.cfg.Recheck && limit == b.shortLimit && lack > b.shortOf
}

// sliceSize is what a grant asks for: the gateway's recent rate over the
// horizon (and at least one unit per waiting request), capped by a fair
// share of what the window has left as last seen, and never less than
// least. ks.mu is held.
func (l *Limiter) sliceSize(b *bucket, limit, least int64, now time.Time) int64 {
	want := int64(b.rate.perSecond(now) * l.cfg.Horizon.Seconds())
	if b.kind == rpm {
		want = max(want, b.waiting)
	}
	want = min(want, (limit-b.ref.val)/l.cfg.FairShare)
	return max(want, least, 1)
}

// rateMeter estimates units per second over the last second with two
// one-second buckets (the previous one weighted by how much of it still
// lies within the last second).
type rateMeter struct {
	sec       int64 // Unix second of cur
	cur, prev int64
}

func (m *rateMeter) add(now time.Time, n int64) {
	m.advance(now)
	m.cur += n
}

func (m *rateMeter) advance(now time.Time) {
	s := now.Unix()
	switch {
	case s == m.sec:
	case s == m.sec+1:
		m.sec, m.prev, m.cur = s, m.cur, 0
	case s > m.sec:
		m.sec, m.prev, m.cur = s, 0, 0
	}
}

func (m *rateMeter) perSecond(now time.Time) float64 {
	m.advance(now)
	frac := float64(now.Nanosecond()) / float64(time.Second)
	return max(0, float64(m.prev)*(1-frac)+float64(m.cur))
}

// acquire takes b's operation slot, or gives up when ctx ends.
func (b *bucket) acquire(ctx context.Context) error {
	select {
	case b.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tryAcquire takes b's operation slot if it is free.
func (b *bucket) tryAcquire() bool {
	select {
	case b.sem <- struct{}{}:
		return true
	default:
		return false
	}
}

// release frees b's operation slot, then sees a counter change the watch
// delivered meanwhile. ks.mu must not be held.
func (b *bucket) release(ks *keyState) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	<-b.sem
	if d := b.deferred; d.key != "" {
		b.deferred = counterRef{}
		b.see(d)
	}
}
