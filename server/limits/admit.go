package limits

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/server/keys"
)

// ErrNegativeReservation is Admit's refusal of a negative token
// reservation.
var ErrNegativeReservation = errors.New("limits: negative token reservation")

// Admit charges one request to key p's RPM window and reserves
// reserveTokens against its TPD day; the caller settles the reservation
// with the real usage when the request ends. A key without limits costs
// nothing. When the slices this gateway holds cover the request (the hit
// path) Admit takes one mutex, touches no etcd and does not allocate.
// Otherwise it waits for one grant from etcd, at most until ctx ends.
//
// It returns a *Denied when the window's budget cannot cover the request
// (429), and an error wrapping ErrUnavailable when etcd is unreachable
// and the held slices do not cover it (503). Refused requests are charged
// nothing. A negative reservation is a caller's bug (an overflowed sum,
// say) and is refused with ErrNegativeReservation rather than admitted as
// free; a reservation larger than the whole TPD can never fit and is
// refused at once.
func (l *Limiter) Admit(ctx context.Context, p *keys.Principal, reserveTokens int64) (Reservation, error) {
	if reserveTokens < 0 {
		return Reservation{}, fmt.Errorf("%w: %d tokens", ErrNegativeReservation, reserveTokens)
	}
	if p.RPM <= 0 && p.TPD <= 0 {
		return Reservation{}, nil
	}
	if p.TPD <= 0 {
		reserveTokens = 0
	}
	for {
		ks, now := l.lockState(p)
		l.dropLowered(ks, &ks.rpm, p.RPM)
		l.dropLowered(ks, &ks.tpd, p.TPD)
		if p.TPD > 0 && reserveTokens > p.TPD {
			d := l.denied(ks, p, tpd, now)
			ks.mu.Unlock()
			return Reservation{}, d
		}
		b, limit, lack := lacking(ks, p, reserveTokens)
		if b == nil {
			r := l.take(ks, p, reserveTokens, now)
			ks.mu.Unlock()
			return r, nil
		}
		if l.knownShort(b, limit, lack, now) {
			d := l.denied(ks, p, b.kind, now)
			ks.mu.Unlock()
			return Reservation{}, d
		}
		// Under the gate: no grant starts once Run has begun stopping.
		l.gate.RLock()
		switch {
		case l.stopped.Load():
			l.gate.RUnlock()
			ks.mu.Unlock()
			return Reservation{}, errStopped
		case l.health.isDown():
			l.gate.RUnlock()
			ks.mu.Unlock()
			return Reservation{}, errDegraded
		}
		call := l.joinGrant(ks, b, limit, lack)
		if tl := reserveTokens - ks.tpd.local; b == &ks.rpm && p.TPD > 0 && tl > 0 && !l.knownShort(&ks.tpd, p.TPD, tl, now) {
			l.joinGrant(ks, &ks.tpd, p.TPD, tl) // both lack: one round trip, not two in a row
		}
		l.gate.RUnlock()
		b.waiting++
		ks.mu.Unlock()

		var waitErr error
		select {
		case <-call.done:
		case <-ctx.Done():
			waitErr = ctx.Err()
		}
		ks.mu.Lock()
		b.waiting--
		ks.mu.Unlock()
		switch {
		case waitErr != nil:
			return Reservation{}, fmt.Errorf("%w: gave up waiting for a slice: %w", ErrUnavailable, waitErr)
		case call.err != nil && !errors.Is(call.err, errRolled):
			return Reservation{}, call.err
		}
		// Granted, found short (knownShort now decides), or the window
		// rolled: look again.
	}
}

// lacking returns the bucket that cannot cover the request, its limit and
// how many units it lacks; nil when both cover it. ks.mu is held.
func lacking(ks *keyState, p *keys.Principal, reserve int64) (*bucket, int64, int64) {
	if p.RPM > 0 && ks.rpm.local < 1 {
		return &ks.rpm, p.RPM, 1 - ks.rpm.local
	}
	// A negative balance (usage above reservations, not yet charged)
	// must be covered first too.
	if p.TPD > 0 && ks.tpd.local < reserve {
		return &ks.tpd, p.TPD, reserve - ks.tpd.local
	}
	return nil, 0, 0
}

// take admits from the held slices. ks.mu is held.
func (l *Limiter) take(ks *keyState, p *keys.Principal, reserve int64, now time.Time) Reservation {
	r := Reservation{l: l, ks: ks}
	if p.RPM > 0 {
		b := &ks.rpm
		b.local--
		b.rate.add(now, 1)
		b.lastUse = now
		r.rpmEnd = b.ref.end
		l.maybePrefetch(ks, b, p.RPM)
	}
	if p.TPD > 0 {
		b := &ks.tpd
		b.local -= reserve
		b.rate.add(now, reserve)
		b.lastUse = now
		r.tpdEnd, r.Reserved = b.ref.end, reserve
		l.maybePrefetch(ks, b, p.TPD)
	}
	r.state = l.snapshot(ks, p, now)
	return r
}
