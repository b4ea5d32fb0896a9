package forward

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/audit/head"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// Collect enqueues every head of the log not enqueued yet, each with the
// leaves it adds to the previous one, oldest first, and returns how many.
// Days before the cursor are complete (every tree has a final head
// enqueued) and are not read again.
func (f *Forwarder) Collect(ctx context.Context) (int, error) {
	f.collectMu.Lock()
	defer f.collectMu.Unlock()
	var cursor string
	if err := f.db.View(func(tx *bolt.Tx) error {
		cursor = string(tx.Bucket(bucketMeta).Get(metaCursor))
		return nil
	}); err != nil {
		return 0, fmt.Errorf("forward: %w", err)
	}
	days, err := f.opts.Source.Days(cursor)
	if err != nil {
		return 0, fmt.Errorf("forward: days: %w", err)
	}
	today := ids.Day(f.opts.Now())
	n, complete := 0, true
	for _, day := range days {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		added, tenants, done, err := f.collectDay(day)
		n += added
		if err != nil {
			return n, err
		}
		// The cursor moves over complete days only, in order.
		if complete = complete && done && day < today; complete {
			if err := f.completeDay(day, tenants); err != nil {
				return n, err
			}
		}
	}
	if n > 0 {
		f.stats.enqueued.Add(uint64(n))
		f.opts.Logger.Debug("central forwarder: heads queued", "heads", n)
	}
	return n, nil
}

// collectDay enqueues the new heads of a day's trees (those of tenants);
// done reports that every tree's last head is final and that the day has
// no tree besides those.
func (f *Forwarder) collectDay(day string) (added int, tenants []string, done bool, err error) {
	tenants, err = f.opts.Source.Tenants(day)
	if err != nil {
		return 0, nil, false, fmt.Errorf("forward: trees of %s: %w", day, err)
	}
	done = true
	for _, tenant := range tenants {
		a, last, err := f.collectTree(tenant, day)
		added += a
		if err != nil {
			return added, tenants, false, err
		}
		done = done && last.Final()
	}
	if !done {
		return added, tenants, false, nil
	}
	// The listing may predate a tree: a tenant's first event of the day
	// acknowledged after it, the day finalized before the listed trees
	// were read. A final head read above means the day was finalized
	// before, so a listing now has every tree; one not handled leaves the
	// day to the next Collect.
	again, err := f.opts.Source.Tenants(day)
	if err != nil {
		return added, tenants, false, fmt.Errorf("forward: trees of %s: %w", day, err)
	}
	if late := newTenants(tenants, again); len(late) > 0 {
		f.opts.Logger.Debug("central forwarder: trees appeared while a day was read; collecting it again",
			"day", day, "tenants", late)
		return added, tenants, false, nil
	}
	return added, tenants, true, nil
}

// newTenants returns the tenants of again not in listed.
func newTenants(listed, again []string) []string {
	seen := make(map[string]struct{}, len(listed))
	for _, t := range listed {
		seen[t] = struct{}{}
	}
	var out []string
	for _, t := range again {
		if _, ok := seen[t]; !ok {
			out = append(out, t)
		}
	}
	return out
}

// collectTree enqueues the new heads of one tree, a transaction per head,
// and returns the tree's last enqueued head.
func (f *Forwarder) collectTree(tenant, day string) (int, head.Head, error) {
	var st treeState
	if err := f.db.View(func(tx *bolt.Tx) (err error) {
		st, err = loadTree(tx, tenant, day)
		return err
	}); err != nil {
		return 0, head.Head{}, err
	}
	// Only the heads not yet queued: the poll runs every few seconds and
	// a day's tree gathers a head per head interval.
	heads, err := f.opts.Source.HeadsFrom(tenant, day, uint64(st.Heads))
	if err != nil {
		return 0, st.Last, fmt.Errorf("forward: heads of %s/%s: %w", tenant, day, err)
	}
	added := 0
	for _, h := range heads {
		leaves, err := f.leavesBetween(tenant, day, st.Last, h)
		if err != nil {
			return added, st.Last, err
		}
		if err := f.db.Update(func(tx *bolt.Tx) error {
			return put(tx, tenant, day, st, h, leaves, f.opts.Now())
		}); err != nil {
			return added, st.Last, fmt.Errorf("forward: queue head of %s/%s: %w", tenant, day, err)
		}
		st.Heads++
		st.Last = h
		added++
	}
	return added, st.Last, nil
}

// leavesBetween reads the leaves head h adds to prev (zero: none yet).
func (f *Forwarder) leavesBetween(tenant, day string, prev, h head.Head) ([]auditlog.LeafRef, error) {
	if h.EventCount < prev.EventCount || h.LastSequence < prev.LastSequence {
		return nil, fmt.Errorf("forward: head of %s/%s with %d events follows one with %d", tenant, day, h.EventCount, prev.EventCount)
	}
	if h.EventCount == prev.EventCount {
		return nil, nil
	}
	leaves, err := f.opts.Source.Leaves(tenant, day, prev.LastSequence, h.LastSequence)
	if err != nil {
		return nil, fmt.Errorf("forward: leaves of %s/%s: %w", tenant, day, err)
	}
	if want := h.EventCount - prev.EventCount; uint64(len(leaves)) != want {
		return nil, fmt.Errorf("forward: %s/%s: %d leaves between sequences %d and %d, want %d",
			tenant, day, len(leaves), prev.LastSequence, h.LastSequence, want)
	}
	for i, l := range leaves {
		if l.LeafIndex != prev.EventCount+uint64(i) {
			return nil, fmt.Errorf("forward: %s/%s: leaf %d has index %d", tenant, day, prev.EventCount+uint64(i), l.LeafIndex)
		}
	}
	return leaves, nil
}

// completeDay records that day is complete (its trees, of tenants, all
// have a final head queued): the next Collect starts after it, and the
// trees' states are dropped.
func (f *Forwarder) completeDay(day string, tenants []string) error {
	next, err := ids.DayEnd(day)
	if err != nil {
		return err
	}
	err = f.db.Update(func(tx *bolt.Tx) error {
		for _, tenant := range tenants {
			if err := tx.Bucket(bucketTrees).Delete(treeKey(tenant, day)); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(metaCursor, []byte(ids.Day(next)))
	})
	if err != nil {
		return fmt.Errorf("forward: complete %s: %w", day, err)
	}
	return nil
}
