package limits

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var clientv3CountOnly = clientv3.WithCountOnly()

// counterRef is a gateway's view of one window's etcd counter: the value
// and mod revision it last saw, so a grant is usually one transaction.
type counterRef struct {
	key string
	end time.Time // the window's end
	val int64
	rev int64 // mod revision of val; 0: not seen, or absent
}

// takeUnits adds up to want (at least least) to the counter without
// passing limit and returns how much it added: 0 means that not even least
// fits, which it only concludes from a value read in this call (or from
// least > limit).
func (l *Limiter) takeUnits(ctx context.Context, c *counterRef, limit, want, least int64) (int64, error) {
	fresh := false
	for {
		remaining := limit - c.val
		if remaining < least || remaining <= 0 {
			if c.rev == 0 || fresh {
				return 0, nil
			}
			if err := l.read(ctx, c); err != nil {
				return 0, err
			}
			fresh = true
			continue
		}
		n := min(want, remaining)
		ok, err := l.swap(ctx, c, c.val+n)
		if err != nil {
			return 0, err
		}
		if ok {
			return n, nil
		}
		fresh = true // the failed compare read the current value
	}
}

// giveUnits subtracts n units granted but not used. A counter that no
// longer exists (its window's lease expired) needs nothing back.
func (l *Limiter) giveUnits(ctx context.Context, c *counterRef, n int64) error {
	for {
		if c.rev == 0 {
			if err := l.read(ctx, c); err != nil {
				return err
			}
			if c.rev == 0 {
				return nil
			}
		}
		ok, err := l.swap(ctx, c, max(0, c.val-n))
		if err != nil || ok {
			return err
		}
	}
}

// chargeUnits adds n whatever the limit: usage above a reservation has
// already happened and must be counted.
func (l *Limiter) chargeUnits(ctx context.Context, c *counterRef, n int64) error {
	for {
		ok, err := l.swap(ctx, c, c.val+n)
		if err != nil || ok {
			return err
		}
	}
}

// swap sets the counter to v if it still holds the cached value (creating
// it, under its window's lease, if it is believed absent). A failed compare
// refreshes the cache from the same transaction.
func (l *Limiter) swap(ctx context.Context, c *counterRef, v int64) (bool, error) {
	for attempt := 0; ; attempt++ {
		var cmp clientv3.Cmp
		var put clientv3.Op
		val := strconv.FormatInt(v, 10)
		if c.rev == 0 {
			lease, err := l.windowLease(ctx, c.end)
			if err != nil {
				return false, err
			}
			cmp = clientv3.Compare(clientv3.CreateRevision(c.key), "=", 0)
			put = clientv3.OpPut(c.key, val, clientv3.WithLease(lease))
		} else {
			cmp = clientv3.Compare(clientv3.ModRevision(c.key), "=", c.rev)
			put = clientv3.OpPut(c.key, val, clientv3.WithIgnoreLease())
		}
		l.txns.Add(1)
		resp, err := l.cli.Txn(ctx).If(cmp).Then(put).Else(clientv3.OpGet(c.key)).Commit()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt == 0 {
			// The cached lease is gone (revoked, or a clock jumped): the
			// transaction did nothing; take a new lease once.
			l.health.observe(nil)
			l.forgetLease(c.end)
			continue
		}
		l.health.observe(err)
		if err != nil {
			return false, wrapUnavailable("transaction on "+c.key, err)
		}
		if resp.Succeeded {
			c.val, c.rev = v, resp.Header.Revision
			return true, nil
		}
		return false, c.load(resp.Responses[0].GetResponseRange().Kvs)
	}
}

// read refreshes the cached value.
func (l *Limiter) read(ctx context.Context, c *counterRef) error {
	l.txns.Add(1)
	resp, err := l.cli.Get(ctx, c.key)
	l.health.observe(err)
	if err != nil {
		return wrapUnavailable("read of "+c.key, err)
	}
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

// wrapUnavailable marks an etcd failure as ErrUnavailable.
func wrapUnavailable(op string, err error) error {
	return fmt.Errorf("%w: etcd %s: %w", ErrUnavailable, op, err)
}
