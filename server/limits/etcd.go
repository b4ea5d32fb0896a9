package limits

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// counterRef is a gateway's view of one etcd counter: the value and
// revision it last saw, so a grant usually takes one transaction.
type counterRef struct {
	key string
	val int64
	rev int64 // mod revision of val; 0: not seen, may not exist
	end time.Time
}

// take adds up to want (at least least) to the counter, without passing
// limit, and returns how much was added (0 when even least does not fit).
// It is one transaction when the cached value is current.
func (l *Limiter) takeFromEtcd(ctx context.Context, c *counterRef, limit, want, least int64) (int64, error) {
	for {
		remaining := limit - c.val
		if remaining < least || remaining <= 0 {
			// The cache may be stale in the favourable direction only if
			// another gateway gave units back; read to be sure.
			if c.rev != 0 {
				if err := l.refresh(ctx, c); err != nil {
					return 0, err
				}
				if limit-c.val < least || limit-c.val <= 0 {
					return 0, nil
				}
				continue
			}
			return 0, nil
		}
		n := min(want, remaining)
		ok, err := l.swap(ctx, c, c.val+n)
		if err != nil {
			return 0, err
		}
		if ok {
			return n, nil
		}
	}
}

// give subtracts n from the counter (units granted but not used).
func (l *Limiter) give(ctx context.Context, c *counterRef, n int64) error {
	for n > 0 {
		if c.rev == 0 {
			if err := l.refresh(ctx, c); err != nil {
				return err
			}
		}
		ok, err := l.swap(ctx, c, max(0, c.val-n))
		if err != nil || ok {
			return err
		}
	}
	return nil
}

// charge adds n to the counter whatever the limit: usage above a
// reservation has happened and must be counted.
func (l *Limiter) charge(ctx context.Context, c *counterRef, n int64) error {
	for n > 0 {
		ok, err := l.swap(ctx, c, c.val+n)
		if err != nil || ok {
			return err
		}
	}
	return nil
}

// swap sets the counter to v if it still holds the cached value; on a
// conflict the cache is refreshed from the same transaction.
func (l *Limiter) swap(ctx context.Context, c *counterRef, v int64) (bool, error) {
	var cmp clientv3.Cmp
	put := clientv3.OpPut(c.key, strconv.FormatInt(v, 10), clientv3.WithIgnoreLease())
	if c.rev == 0 {
		lease, err := l.windowLease(ctx, c.end)
		if err != nil {
			return false, err
		}
		cmp = clientv3.Compare(clientv3.CreateRevision(c.key), "=", 0)
		put = clientv3.OpPut(c.key, strconv.FormatInt(v, 10), clientv3.WithLease(lease))
	} else {
		cmp = clientv3.Compare(clientv3.ModRevision(c.key), "=", c.rev)
	}
	l.txns.Add(1)
	resp, err := l.cli.Txn(ctx).If(cmp).Then(put).Else(clientv3.OpGet(c.key)).Commit()
	if err != nil {
		l.setHealth(err)
		return false, fmt.Errorf("limits: etcd transaction on %s: %w", c.key, err)
	}
	l.setHealth(nil)
	if resp.Succeeded {
		c.val, c.rev = v, resp.Header.Revision
		return true, nil
	}
	return false, c.load(resp.Responses[0].GetResponseRange().Kvs)
}

// refresh reads the counter.
func (l *Limiter) refresh(ctx context.Context, c *counterRef) error {
	l.txns.Add(1)
	resp, err := l.cli.Get(ctx, c.key)
	if err != nil {
		l.setHealth(err)
		return fmt.Errorf("limits: etcd read of %s: %w", c.key, err)
	}
	l.setHealth(nil)
	return c.load(resp.Kvs)
}

func (c *counterRef) load(kvs []*mvccpb.KeyValue) error {
	if len(kvs) == 0 {
		c.val, c.rev = 0, 0
		return nil
	}
	v, err := strconv.ParseInt(string(kvs[0].Value), 10, 64)
	if err != nil {
		return fmt.Errorf("limits: counter %s holds %q: %w", c.key, kvs[0].Value, err)
	}
	c.val, c.rev = v, kvs[0].ModRevision
	return nil
}

// windowLease returns a lease that outlives the window ending at end by
// leaseMargin, so counters of past windows disappear by themselves. Never
// kept alive, so a gateway's death changes nothing about it.
func (l *Limiter) windowLease(ctx context.Context, end time.Time) (clientv3.LeaseID, error) {
	ttl := int64(end.Sub(l.now())/time.Second) + int64(leaseMargin/time.Second)
	l.txns.Add(1)
	resp, err := l.cli.Grant(ctx, ttl)
	if err != nil {
		l.setHealth(err)
		return 0, fmt.Errorf("limits: etcd lease: %w", err)
	}
	return resp.ID, nil
}
