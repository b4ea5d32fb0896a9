package limits

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Run does the limiter's background work until ctx ends: prefetching
// slices, returning idle ones, charging usage above reservations, probing
// etcd while degraded. When ctx ends it lets in-flight grants land and
// gives back everything this gateway holds, then refuses misses with
// ErrUnavailable. Stop it after the HTTP server has drained, so in-flight
// requests settle first.
func (l *Limiter) Run(ctx context.Context) error {
	if !l.running.CompareAndSwap(false, true) {
		return errors.New("limits: Run called twice")
	}
	var workers sync.WaitGroup
	for range l.cfg.Workers {
		workers.Go(func() { l.work(ctx) })
	}
	workers.Go(func() { l.watch(ctx) })
	sweep := time.NewTicker(l.cfg.SweepEvery)
	defer sweep.Stop()
	probe := time.NewTicker(l.cfg.ProbeEvery)
	defer probe.Stop()
	for {
		select {
		case <-ctx.Done():
			l.gate.Lock()
			l.running.Store(false)
			l.stopped.Store(true)
			l.gate.Unlock()
			workers.Wait()
			l.dropQueued()
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.ShutdownTimeout)
			defer cancel()
			_ = l.bg.wait(sctx)
			l.returnAll(sctx)
			return nil
		case <-sweep.C:
			l.sweep(ctx, false)
		case <-probe.C:
			if l.health.isDown() || l.health.sinceOK() >= l.cfg.IdleProbe {
				_ = l.probe(ctx)
			}
		}
	}
}

// work runs queued prefetches until ctx ends.
func (l *Limiter) work(ctx context.Context) {
	for {
		select {
		case j := <-l.jobs:
			l.prefetch(j)
		case <-ctx.Done():
			return
		}
	}
}

// dropQueued discards prefetches nobody will run.
func (l *Limiter) dropQueued() {
	for {
		select {
		case j := <-l.jobs:
			j.ks.mu.Lock()
			j.ks.bucket(j.kind).queued = false
			j.ks.mu.Unlock()
			l.bg.done()
		default:
			return
		}
	}
}

// sweep returns slices of keys idle on this gateway, charges pending
// usage above reservations and forgets long-idle keys. It skips a bucket
// whose etcd slot is busy (unless wait is set), and everything while etcd
// is unreachable: held slices then stay usable.
func (l *Limiter) sweep(ctx context.Context, wait bool) {
	now := l.now()
	idle, evict := now.Add(-l.cfg.IdleAfter), now.Add(-l.cfg.EvictAfter)
	l.keys.Range(func(_, v any) bool {
		ks := v.(*keyState)
		for _, b := range []*bucket{&ks.rpm, &ks.tpd} {
			if l.health.isDown() || ctx.Err() != nil {
				return false
			}
			if wait {
				if b.acquire(ctx) != nil {
					return false
				}
			} else if !b.tryAcquire() {
				continue
			}
			ks.mu.Lock()
			giveBack := b.lastUse.Before(idle) && b.waiting == 0
			ks.mu.Unlock()
			octx, cancel := context.WithTimeout(ctx, l.cfg.GrantTimeout)
			l.balance(octx, ks, b, giveBack)
			cancel()
			b.release(ks)
		}
		l.evict(ks, evict)
		return true
	})
}

// returnAll gives back every held unit and charges every debt, at
// shutdown.
func (l *Limiter) returnAll(ctx context.Context) {
	l.keys.Range(func(_, v any) bool {
		ks := v.(*keyState)
		for _, b := range []*bucket{&ks.rpm, &ks.tpd} {
			if err := b.acquire(ctx); err != nil {
				l.log.Warn("limits: shutdown ran out of time; held slices are lost for their windows", "err", err)
				return false
			}
			l.balance(ctx, ks, b, true)
			b.release(ks)
		}
		return true
	})
}
