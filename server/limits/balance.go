package limits

import (
	"context"
	"time"
)

// balance evens b's balance with etcd: a negative balance (usage above
// reservations) is charged, a positive one (units held) goes back when
// giveBack is set. The caller holds b's operation slot.
//
// A failed return loses the units for the window: the transaction may
// have happened, and holding units that etcd no longer counts could admit
// too much. A failed charge keeps the debt, so at worst it is charged
// twice; neither can admit beyond the limit.
func (l *Limiter) balance(ctx context.Context, ks *keyState, b *bucket, giveBack bool) {
	ks.mu.Lock()
	l.roll(ks, b, l.now())
	n := b.local
	if n == 0 || (n > 0 && !giveBack) {
		ks.mu.Unlock()
		return
	}
	b.local = 0
	b.returning = n // still shown as held until the counter moves
	ref := b.ref
	ks.mu.Unlock()

	var err error
	if n > 0 {
		err = l.giveUnits(ctx, &ref, n)
	} else {
		err = l.chargeUnits(ctx, &ref, -n)
	}

	ks.mu.Lock()
	defer ks.mu.Unlock()
	b.returning = 0
	current := b.ref.key == ref.key
	b.see(ref)
	switch {
	case err == nil:
		if current {
			b.shortAt = time.Time{} // the counter moved: ask etcd again
		}
	case n < 0 && current:
		b.local += n
		l.log.Warn("limits: charging usage above reservations failed; retrying later", "key_id", ks.keyID, "tokens", -n, "err", err)
	case n < 0:
		l.settleWindow(ks, ref, n)
	default:
		l.log.Warn("limits: returning a slice failed; it is lost for this window", "key_id", ks.keyID, "kind", b.kind.String(), "units", n, "err", err)
	}
}
