package forward

import (
	"context"
	"errors"
	"fmt"
	"math"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/central/centralclient"
)

// Flush sends the queue in order until it is empty. It stops at the first
// send that may succeed later (the central plane unreachable, overloaded
// or failing) and returns its error; the item stays first in the queue.
func (f *Forwarder) Flush(ctx context.Context) error {
	f.flushMu.Lock()
	defer f.flushMu.Unlock()
	for ctx.Err() == nil {
		id, it, leaves, ok, err := f.first()
		if err != nil || !ok {
			return err
		}
		if err := f.send(ctx, id, it, leaves); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// send publishes one item and dequeues it once stored or refused for good.
func (f *Forwarder) send(ctx context.Context, id uint64, it item, leaves []centralclient.Leaf) error {
	log := f.opts.Logger.With("tenant_id", it.Head.TenantID, "day", it.Head.Day, "event_count", it.Head.EventCount, "signed_at", it.Head.SignedAt)
	if it.Head.EventCount > math.MaxUint32 || it.Head.LastSequence > math.MaxUint32 {
		log.Error("central forwarder: head beyond 32-bit counts dropped")
		f.stats.refused.Add(1)
		return f.remove(id, it, &refusal{Item: it, Reason: "too_large", Error: "counts beyond 32 bits", At: f.opts.Now().UTC()})
	}
	u := centralclient.Upload{Head: it.Head, FirstLeafIndex: it.FirstLeafIndex, Leaves: leaves, LeafRetentionDays: f.opts.LeafRetentionDays}
	err := f.publish(ctx, u)
	if reason, stored, ok := centralclient.RefusalOf(err); ok && reason == centralclient.ReasonLeafGap && stored < u.FirstLeafIndex {
		// The central plane holds fewer leaves than this item starts at
		// (it lost them, or an earlier item was refused): send them too.
		log.Warn("central forwarder: central plane misses leaves; resending from its size", "stored_event_count", stored)
		if u.Leaves, err = f.leavesFrom(it, stored); err != nil {
			return err
		}
		u.FirstLeafIndex = stored
		err = f.publish(ctx, u)
	}
	reason, _, refused := centralclient.RefusalOf(err)
	switch code := status.Code(err); {
	case err == nil:
		f.stats.sent.Add(1)
		if err := f.remove(id, it, nil); err != nil {
			return err
		}
		if f.opts.OnStored != nil {
			f.opts.OnStored(it.Head)
		}
		return nil
	case refused && (reason == centralclient.ReasonFromFuture || reason == centralclient.ReasonConflict):
		// The appliance's clock is ahead of the central plane's, or another
		// upload of the tree raced this one: it will pass later.
		return fmt.Errorf("forward: publish head of %s/%s: %w", it.Head.TenantID, it.Head.Day, err)
	case refused && reason == centralclient.ReasonStaleHead:
		// The central plane already holds a later head of the tree, which
		// agrees with this one: a head that disagrees with the stored tree
		// is refused as inconsistent, and set aside below.
		log.Info("central forwarder: head superseded at the central plane")
		return f.remove(id, it, nil)
	case code == codes.InvalidArgument || code == codes.PermissionDenied || code == codes.FailedPrecondition || code == codes.ResourceExhausted:
		log.Error("central forwarder: head refused by the central plane", "reason", reason, "code", code.String(), "err", status.Convert(err).Message())
		f.stats.refused.Add(1)
		return f.remove(id, it, &refusal{Item: it, Reason: reason, Error: status.Convert(err).Message(), At: f.opts.Now().UTC()})
	default:
		return fmt.Errorf("forward: publish head of %s/%s: %w", it.Head.TenantID, it.Head.Day, err)
	}
}

// errUploadTimeout is the cause of an upload's context when its
// UploadTimeout passed.
var errUploadTimeout = errors.New("upload timeout")

// publish sends one upload and waits for its answer, for at most
// UploadTimeout: a connection that went silent (the central plane lost
// power, a link that drops every packet) would otherwise hold the upload,
// and every head queued behind it, until the operating system gives up on
// the connection. Past it the upload fails with DeadlineExceeded, which
// send treats as a plane that cannot be reached: the head stays queued.
func (f *Forwarder) publish(ctx context.Context, u centralclient.Upload) error {
	uctx, cancel := context.WithTimeoutCause(ctx, f.opts.UploadTimeout, errUploadTimeout)
	defer cancel()
	_, err := centralclient.Publish(uctx, f.opts.Client, u)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(uctx), errUploadTimeout) {
		return fmt.Errorf("no answer from the central plane within %s (the upload timeout): %w", f.opts.UploadTimeout, err)
	}
	return err
}

// leavesFrom reads an item's tree leaves from index from up to its head.
func (f *Forwarder) leavesFrom(it item, from uint64) ([]centralclient.Leaf, error) {
	all, err := f.opts.Source.Leaves(it.Head.TenantID, it.Head.Day, 0, it.Head.LastSequence)
	if err != nil {
		return nil, fmt.Errorf("forward: leaves of %s/%s: %w", it.Head.TenantID, it.Head.Day, err)
	}
	if uint64(len(all)) != it.Head.EventCount || from > uint64(len(all)) {
		return nil, fmt.Errorf("forward: %s/%s has %d leaves up to sequence %d, its head %d",
			it.Head.TenantID, it.Head.Day, len(all), it.Head.LastSequence, it.Head.EventCount)
	}
	out := make([]centralclient.Leaf, 0, len(all)-int(from))
	for _, l := range all[from:] {
		out = append(out, centralclient.LeafOf(l.RequestID, l.Sequence, l.LeafIndex, l.LeafHash, l.Leaf))
	}
	return out, nil
}
