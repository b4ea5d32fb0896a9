package limits

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/server/keys"
)

// bucket is a gateway's allotment of one key's budget in the current
// window of one kind.
type bucket struct {
	ref         counterRef // the window's etcd counter, as last seen
	local       int64      // units held here, not yet admitted
	lastSlice   int64
	sinceGrant  int64 // units admitted since the last grant: the rate
	lastGrant   time.Time
	lastUse     time.Time
	prefetching bool
}

// keyState is one key's allotments on this gateway.
type keyState struct {
	tenantID, keyID string
	// grantMu serialises this gateway's etcd operations for the key, so
	// concurrent misses make one grant, not one each.
	grantMu sync.Mutex
	mu      sync.Mutex // guards the buckets
	rpm     bucket
	tpd     bucket
}

// roll moves b to the window holding now. Units held for a past RPM window
// are simply dropped (that window is over); a past TPD window's units are
// given back by the idle sweep before the day ends, or lost with it.
func (ks *keyState) roll(b *bucket, k kind, now time.Time) {
	if now.Before(b.ref.end) {
		return
	}
	_, end, name := window(k, now)
	*b = bucket{ref: counterRef{key: counterKey(ks.tenantID, ks.keyID, k, name), end: end}, lastGrant: now}
}

// Reservation is an admitted request: one request charged to the RPM
// window and Reserved tokens held against the TPD window until Settle.
type Reservation struct {
	l        *Limiter
	ks       *keyState
	tpdKey   string
	tpdEnd   time.Time
	Reserved int64
	state    State
}

// State is the limit state at admission, for the x-ratelimit headers.
func (r Reservation) State() State { return r.state }

// Admit charges one request to key p and reserves reserve tokens. The hit
// path (the slices held here cover it) takes one mutex and no allocation.
// It returns a *Denied when the window's budget is exhausted (429), and an
// error wrapping ErrUnavailable when etcd is unreachable and the held
// slices do not cover the request (503).
func (l *Limiter) Admit(ctx context.Context, p *keys.Principal, reserve int64) (Reservation, error) {
	if p.RPM <= 0 && p.TPD <= 0 {
		return Reservation{}, nil
	}
	if p.TPD <= 0 || reserve < 0 {
		reserve = 0
	}
	ks := l.state(p)
	for {
		now := l.now()
		ks.mu.Lock()
		ks.roll(&ks.rpm, rpm, now)
		ks.roll(&ks.tpd, tpd, now)
		needR := p.RPM > 0 && ks.rpm.local < 1
		needT := p.TPD > 0 && ks.tpd.local < reserve
		if !needR && !needT {
			r := l.take(ks, p, reserve, now)
			ks.mu.Unlock()
			return r, nil
		}
		ks.mu.Unlock()
		if err := l.refill(ctx, ks, p, reserve); err != nil {
			return Reservation{}, err
		}
	}
}

// take admits from the held slices; ks.mu is held.
func (l *Limiter) take(ks *keyState, p *keys.Principal, reserve int64, now time.Time) Reservation {
	r := Reservation{l: l, ks: ks}
	if p.RPM > 0 {
		b := &ks.rpm
		b.local--
		b.sinceGrant++
		b.lastUse = now
		l.maybePrefetch(ks, b, rpm, p.RPM)
	}
	if p.TPD > 0 {
		b := &ks.tpd
		b.local -= reserve
		b.sinceGrant += reserve
		b.lastUse = now
		r.tpdKey, r.tpdEnd, r.Reserved = b.ref.key, b.ref.end, reserve
		l.maybePrefetch(ks, b, tpd, p.TPD)
	}
	r.state = ks.snapshot(p, now)
	return r
}

// maybePrefetch starts a background grant when a slice runs low, so the
// hit path rarely waits for etcd; ks.mu is held.
func (l *Limiter) maybePrefetch(ks *keyState, b *bucket, k kind, limit int64) {
	if b.prefetching || b.lastSlice < 4 || b.local > b.lastSlice/4 {
		return
	}
	b.prefetching = true
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), grantTimeout)
		defer cancel()
		ks.grantMu.Lock()
		defer ks.grantMu.Unlock()
		_, _ = l.grant(ctx, ks, b, k, limit, 1)
		ks.mu.Lock()
		b.prefetching = false
		ks.mu.Unlock()
	}()
}

// refill makes one synchronous grant for whatever the request lacks.
func (l *Limiter) refill(ctx context.Context, ks *keyState, p *keys.Principal, reserve int64) error {
	ctx, cancel := context.WithTimeout(ctx, grantTimeout)
	defer cancel()
	ks.grantMu.Lock()
	defer ks.grantMu.Unlock()
	now := l.now()
	ks.mu.Lock()
	ks.roll(&ks.rpm, rpm, now)
	ks.roll(&ks.tpd, tpd, now)
	needR := p.RPM > 0 && ks.rpm.local < 1
	lackT := reserve - ks.tpd.local
	ks.mu.Unlock()
	if needR {
		got, err := l.grant(ctx, ks, &ks.rpm, rpm, p.RPM, 1)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		if got == 0 {
			return l.denied(ks, p, rpm, now)
		}
	}
	if p.TPD > 0 && lackT > 0 {
		got, err := l.grant(ctx, ks, &ks.tpd, tpd, p.TPD, lackT)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		if got == 0 {
			return l.denied(ks, p, tpd, now)
		}
	}
	return nil
}

// grant takes a slice for b from etcd and adds it to the held units; it
// returns 0 when not even least fits in the window. ks.grantMu is held.
func (l *Limiter) grant(ctx context.Context, ks *keyState, b *bucket, k kind, limit, least int64) (int64, error) {
	now := l.now()
	ks.mu.Lock()
	ks.roll(b, k, now)
	ref := b.ref
	want := sliceSize(b, limit, least, now)
	ks.mu.Unlock()

	got, err := l.takeFromEtcd(ctx, &ref, limit, want, least)
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if b.ref.key != ref.key {
		// The window rolled during the grant: the slice belongs to a
		// window that is over. Give it back rather than hold it.
		if got > 0 {
			go func() { _ = l.give(context.Background(), &ref, got) }()
		}
		return 0, err
	}
	b.ref = ref
	if err != nil {
		return 0, err
	}
	if got > 0 {
		b.local += got
		b.lastSlice, b.sinceGrant, b.lastGrant = got, 0, now
	}
	return got, nil
}

// sliceSize is what a gateway asks for: its recent rate over horizon, at
// least least, and at most a fair share of what remains in the window.
func sliceSize(b *bucket, limit, least int64, now time.Time) int64 {
	elapsed := max(now.Sub(b.lastGrant), 50*time.Millisecond)
	want := int64(float64(b.sinceGrant) / elapsed.Seconds() * horizon.Seconds())
	want = max(want, least, 1)
	share := max((limit-b.ref.val)/fairShare, least, 1)
	return min(want, share)
}

// Settle reconciles the reservation with the tokens the request really
// used: the difference goes back to this gateway's slice. Usage above the
// reservation (an engine that overran its estimate) is charged to etcd
// whatever the limit, and never blocks the response.
func (r Reservation) Settle(used int64) {
	if r.ks == nil || r.tpdKey == "" {
		return
	}
	diff := r.Reserved - used
	if diff == 0 {
		return
	}
	ks := r.ks
	ks.mu.Lock()
	b := &ks.tpd
	if b.ref.key == r.tpdKey {
		b.local += diff
		b.sinceGrant -= diff
		over := -b.local
		ks.mu.Unlock()
		if over > 0 {
			go r.l.chargeOver(ks, r.tpdKey)
		}
		return
	}
	ks.mu.Unlock()
	// The day rolled while the request ran: settle against its own day.
	go func() {
		ref := counterRef{key: r.tpdKey, end: r.tpdEnd}
		ctx, cancel := context.WithTimeout(context.Background(), grantTimeout)
		defer cancel()
		if diff > 0 {
			_ = r.l.give(ctx, &ref, diff)
		} else {
			_ = r.l.charge(ctx, &ref, -diff)
		}
	}()
}

// chargeOver covers a negative token balance by charging etcd.
func (l *Limiter) chargeOver(ks *keyState, key string) {
	ks.grantMu.Lock()
	defer ks.grantMu.Unlock()
	ks.mu.Lock()
	b := &ks.tpd
	over := -b.local
	ref := b.ref
	ks.mu.Unlock()
	if over <= 0 || ref.key != key {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), grantTimeout)
	defer cancel()
	if err := l.charge(ctx, &ref, over); err != nil {
		l.log.Warn("limits: charging usage above a reservation failed", "key_id", ks.keyID, "tokens", over, "err", err)
		return
	}
	ks.mu.Lock()
	if b.ref.key == key {
		b.ref = ref
		b.local += over
	}
	ks.mu.Unlock()
}
