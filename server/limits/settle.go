package limits

import (
	"context"
	"time"
)

// Reservation is an admitted request: one request charged to its RPM
// window and Reserved tokens held against its TPD day until Settle. The
// zero Reservation (a key without limits) settles to nothing.
type Reservation struct {
	l        *Limiter
	ks       *keyState
	rpmEnd   time.Time // end of the minute charged; zero without RPM
	tpdEnd   time.Time // end of the day reserved against; zero without TPD
	Reserved int64
	state    State
}

// State is the key's limit state just after this admission, for the
// x-ratelimit-* headers.
func (r Reservation) State() State { return r.state }

// Settle reconciles the reservation with the tokens the request really
// used; call it once, when the usage is known (for a stream, at its end).
// The unused part goes back to this gateway's slice. Usage above the
// reservation (an engine overrunning its estimate) is charged from the
// slice and, beyond it, to etcd in the background whatever the limit: it
// never blocks the response. Settle does not allocate unless it has to
// charge etcd.
func (r Reservation) Settle(usedTokens int64) {
	if r.ks == nil || r.tpdEnd.IsZero() {
		return
	}
	diff := r.Reserved - max(usedTokens, 0)
	if diff == 0 {
		return
	}
	ks := r.ks
	ks.mu.Lock()
	b := &ks.tpd
	if ks.dead || r.l.stopped.Load() || !b.ref.end.Equal(r.tpdEnd) {
		// The day ended while the request ran, the key was forgotten or
		// the limiter has given its slices back: settle directly against
		// the reservation's own counter.
		ks.mu.Unlock()
		_, _, name := window(tpd, r.tpdEnd.Add(-time.Nanosecond))
		r.l.settleWindow(ks, counterRef{key: counterKey(ks.tenantID, ks.keyID, tpd, name), end: r.tpdEnd}, diff)
		return
	}
	b.local += diff
	b.rate.add(r.l.now(), -diff)
	if b.local < 0 && !b.charging {
		b.charging = true
		r.l.bg.add()
		go r.l.chargeOverrun(ks, b)
	}
	ks.mu.Unlock()
}

// chargeOverrun charges etcd for a negative balance (usage above the
// reservations and the slice). On failure the balance stays negative, so
// this gateway admits nothing more for the key's tokens until the sweep
// charges it.
func (l *Limiter) chargeOverrun(ks *keyState, b *bucket) {
	defer l.bg.done()
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.GrantTimeout)
	defer cancel()
	err := b.acquire(ctx)
	ks.mu.Lock()
	b.charging = false
	ks.mu.Unlock()
	if err != nil {
		return
	}
	defer b.release(ks)
	l.balance(ctx, ks, b, false)
}

// settleWindow settles a balance against a window's counter in the
// background, outside the bucket's operation slot: delta > 0 goes back,
// delta < 0 is charged. It serves a window that is no longer current, and
// units of the current one that the gateway gave up (dropLowered), which
// it no longer counts as held, and settlements of a key forgotten or a
// limiter stopped while a request ran; a grant running meanwhile only sees
// its compare-and-swap conflict once.
//
// A failed return is not tried again: it may have happened, and returning
// twice would let the window admit more than its limit; the counter stays
// above the truth (under-admission). A failed charge is tried again, up to
// settleAttempts times while its window lasts: a counter left below the
// usage would let the window admit more than its limit, while a charge
// made twice (one whose answer was lost) only makes it admit less.
func (l *Limiter) settleWindow(ks *keyState, ref counterRef, delta int64) {
	l.bg.add()
	go func() {
		defer l.bg.done()
		wait := settleRetryWait
		for attempt := 1; ; attempt++ {
			ctx, cancel := context.WithTimeout(context.Background(), l.cfg.GrantTimeout)
			var err error
			if delta > 0 {
				err = l.giveUnits(ctx, &ref, delta)
			} else {
				err = l.chargeUnits(ctx, &ref, -delta)
			}
			cancel()
			if err == nil {
				return
			}
			if delta > 0 || attempt == settleAttempts || !l.now().Before(ref.end) {
				l.log.Warn("limits: settling a window's counter failed", "key_id", ks.keyID, "counter", ref.key, "tokens", delta,
					"attempts", attempt, "err", err)
				return
			}
			if l.settleRetrying != nil {
				l.settleRetrying(attempt)
			}
			time.Sleep(wait)
			wait *= 2
		}
	}()
}

// A failed charge of a window's counter is tried settleAttempts times in
// all, settleRetryWait apart at first and twice as long each time (about
// 3 s of waits, plus each attempt's GrantTimeout).
const (
	settleAttempts  = 5
	settleRetryWait = 200 * time.Millisecond
)
