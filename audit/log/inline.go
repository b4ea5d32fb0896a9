package log

// An append that finds the log idle commits its own batch, on its own
// goroutine: it journals, syncs, signs and acknowledges it (commitSolo)
// instead of handing it to the committer, which would hand it on to the
// sync and back. At light load (one append per batch) that saves every
// wake-up of another goroutine on the way, each of which wakes a sleeping
// thread, and the process's CPU per event with them.
//
// Idle means: no append is queued, and the sync slot is free, so no batch
// is being journaled, synced or acknowledged (the committer holds the slot
// for each batch from before it is drained until it is acknowledged). The
// inline append takes the slot, so the committer and other appends stay
// out until it has acknowledged its batch: batches are acknowledged in
// journal order. Appends arriving meanwhile find the slot taken and
// queue, and the committer takes them as the next batch once the slot is
// free, as before: under load, batching works as it did.
//
// Only with one sync slot (MaxSyncsInFlight 1, the default): with more,
// a batch is meant to sync while the next is journaled and synced, which
// an inline batch holding every slot would prevent. And only an append
// whose context cannot end goes inline: its caller then waits for the
// sync whatever happens, where Append's context otherwise bounds the wait
// (the gateway records with such a context). It holds closeMu for reading
// throughout, so Close waits for it, as for a queued append.

// tryInline commits p on the caller's goroutine if the log is idle, and
// reports whether it did (p is then settled, woken, and err is nil), or
// the error that refused it before it was committed.
func (l *Log) tryInline(p *pending) (bool, error) {
	l.closeMu.RLock()
	defer l.closeMu.RUnlock()
	if l.closed {
		return false, ErrClosed
	}
	if cap(l.syncSlots) != 1 || len(l.queue) > 0 {
		return false, nil
	}
	select {
	case l.syncSlots <- struct{}{}:
	default:
		return false, nil // a batch is on its way
	}
	defer func() { <-l.syncSlots }()
	if len(l.queue) > 0 {
		// Appends queued meanwhile go first, in the committer's next batch.
		return false, nil
	}
	l.stats.inline.Add(1)
	l.commitSolo([]*pending{p})
	l.fillWhenIdle()
	return true, nil
}
