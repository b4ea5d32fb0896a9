package limits

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// windowLease returns the lease this gateway attaches to counters of
// windows ending at end: it expires LeaseMargin after the window, so old
// counters delete themselves. One lease serves every key's counter of that
// window; it is never kept alive, so no gateway's death changes when it
// expires.
func (l *Limiter) windowLease(ctx context.Context, end time.Time) (clientv3.LeaseID, error) {
	k := end.Unix()
	l.leaseMu.Lock()
	id, ok := l.leases[k]
	l.leaseMu.Unlock()
	if ok {
		return id, nil
	}
	now := l.now()
	ttl := max(int64((end.Sub(now)+l.cfg.LeaseMargin+time.Second-1)/time.Second)+1, 60)
	l.txns.Add(1)
	resp, err := l.cli.Grant(ctx, ttl)
	l.health.observe(err)
	if err != nil {
		return 0, wrapUnavailable("lease grant", err)
	}
	l.leaseMu.Lock()
	defer l.leaseMu.Unlock()
	for e := range l.leases { // forget leases of windows long over
		if time.Unix(e, 0).Add(l.cfg.LeaseMargin).Before(now) {
			delete(l.leases, e)
		}
	}
	if id, ok := l.leases[k]; ok { // another grant raced this one; its lease just expires
		return id, nil
	}
	l.leases[k] = resp.ID
	return resp.ID, nil
}

// forgetLease drops the cached lease for windows ending at end.
func (l *Limiter) forgetLease(end time.Time) {
	l.leaseMu.Lock()
	delete(l.leases, end.Unix())
	l.leaseMu.Unlock()
}
