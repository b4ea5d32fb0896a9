package log

import (
	"context"
	"time"
)

// A start that finds the start file idle, while its syncs are fast, is
// written and synced on its caller's goroutine (tryStartInline) instead
// of being handed to the start committer. The hand-off wakes another
// thread to do a few microseconds of work and wakes the caller's back:
// at light load, on a journal whose sync costs less than that wake-up (a
// tmpfs, a disk whose cache is battery-backed), those wake-ups are most
// of a stream's start, and they compete for the CPU with the call to the
// model that the start was meant to overlap. Where a sync is slow, the
// committer syncs while the model is asked, as before: the first byte
// then waits for the slower of the two, not for their sum.
//
// Idle means: no start is queued and the slot is free (the committer
// holds it from before it drains a batch until the batch is woken). The
// inline start takes the slot, so starts arriving meanwhile queue, and
// the committer takes them once it is free: under load, batching works
// as it did. Only a start whose context cannot end goes inline (its
// caller then waits for the sync whatever happens, as the gateway's
// does), and it holds closeMu for reading throughout, so Close waits for
// it as for a queued start.

// inlineStartSyncMax is the longest last sync of the start file for which
// a start is tried inline: about what a hand-off's wake-ups cost.
const inlineStartSyncMax = 25 * time.Microsecond

// tryStartInline writes and syncs r on the caller's goroutine if the start
// file is idle and its last sync was fast, and reports whether it did (r
// is then done, its error set). The caller holds closeMu for reading and
// has checked the log is open.
func (l *Log) tryStartInline(ctx context.Context, r *startReq) bool {
	st := l.starts
	if ctx.Done() != nil || len(st.queue) > 0 {
		return false
	}
	if d := st.lastSync.Load(); d < 0 || time.Duration(d) > inlineStartSyncMax {
		return false
	}
	if !st.slot.TryLock() {
		return false // a batch is on its way
	}
	defer st.slot.Unlock()
	if len(st.queue) > 0 {
		// Starts queued meanwhile go first, in the committer's next batch.
		return false
	}
	l.stats.inlineStarts.Add(1)
	l.commitStarts([]*startReq{r}, r.frame)
	return true
}
