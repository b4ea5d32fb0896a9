package limits

import (
	"context"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// watch keeps this gateway's cached counters current with every
// gateway's grants and returns: a grant's compare-and-swap then usually
// succeeds at the first attempt, the remaining counts in the headers
// follow the other gateways, and units another gateway gives back are
// seen at once. Exactness never depends on it: every grant is a
// compare-and-swap on the counter's revision.
//
// The watch starts from the revision etcd had when Run started and
// resumes from the last event it applied, so it misses nothing while it
// reconnects; only if that history was compacted does it start afresh,
// and then every refusal asks etcd again.
func (l *Limiter) watch(ctx context.Context) {
	var next int64 // first revision not yet applied; 0: unknown
	for ctx.Err() == nil {
		if next == 0 {
			rev, err := l.revision(ctx)
			if err != nil {
				sleep(ctx, l.cfg.ProbeEvery)
				continue
			}
			next = rev + 1
			l.forgetShortages()
			l.watchOnce.Do(func() { close(l.watching) })
		}
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for resp := range l.cli.Watch(wctx, probeKey, clientv3.WithPrefix(), clientv3.WithRev(next)) {
			if resp.CompactRevision != 0 {
				next = 0 // history gone: start afresh
				break
			}
			if resp.Err() != nil {
				break // no leader, or cancelled: resume from next
			}
			for _, ev := range resp.Events {
				l.apply(ev)
				next = ev.Kv.ModRevision + 1
			}
		}
		cancel()
		sleep(ctx, l.cfg.ProbeEvery)
	}
}

// revision reads etcd's current revision.
func (l *Limiter) revision(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.GrantTimeout)
	defer cancel()
	l.healthReads.Add(1)
	resp, err := l.cli.Get(ctx, probeKey, clientv3CountOnly)
	l.health.observe(err)
	if err != nil {
		return 0, wrapUnavailable("read of the revision", err)
	}
	return resp.Header.Revision, nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// apply applies one counter change to the cache, if this gateway tracks
// that counter.
func (l *Limiter) apply(ev *clientv3.Event) {
	if ev.Type != mvccpb.PUT {
		return
	}
	v, ok := l.counters.Load(string(ev.Kv.Key))
	if !ok {
		return
	}
	val, err := strconv.ParseInt(string(ev.Kv.Value), 10, 64)
	if err != nil {
		return
	}
	ks := v.(*keyState)
	ks.mu.Lock()
	for _, b := range []*bucket{&ks.rpm, &ks.tpd} {
		if b.ref.key != string(ev.Kv.Key) {
			continue
		}
		ref := counterRef{key: b.ref.key, end: b.ref.end, val: val, rev: ev.Kv.ModRevision}
		if len(b.sem) > 0 { // an operation of this gateway is in flight
			if b.deferred.key != ref.key || ref.rev > b.deferred.rev {
				b.deferred = ref
			}
			continue
		}
		b.see(ref)
	}
	ks.mu.Unlock()
	if l.cfg.observed != nil {
		l.cfg.observed(string(ev.Kv.Key), val)
	}
}

// see updates the cached counter with ref if ref is newer. A counter that
// went down (units given back) may now cover what it could not. ks.mu is
// held.
func (b *bucket) see(ref counterRef) {
	if ref.key != b.ref.key || ref.rev < b.ref.rev {
		return
	}
	if ref.val < b.ref.val {
		b.shortAt = time.Time{}
	}
	b.ref.val, b.ref.rev = ref.val, ref.rev
}

// forgetShortages makes every key ask etcd again before refusing.
func (l *Limiter) forgetShortages() {
	l.keys.Range(func(_, v any) bool {
		ks := v.(*keyState)
		ks.mu.Lock()
		ks.rpm.shortAt, ks.tpd.shortAt = time.Time{}, time.Time{}
		ks.mu.Unlock()
		return true
	})
}
