package log

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/audit/leaf"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// commitLoop is the committer: once fewer than MaxSyncsInFlight batches
// are syncing, it takes whatever is queued (at least one append, at most
// MaxBatch appends or MaxBatchBytes) and journals it as one batch, until
// Close closes the queue. Waiting for a free sync before draining the
// queue is what makes batches: everything that arrived during the running
// sync joins the next one. With one sync slot (the default) the committer
// syncs and acknowledges each batch itself (commitSolo): it would wait for
// the slot anyway, and each hand-off to another goroutine wakes a thread.
// With more, each batch's sync runs beside it and ackLoop acknowledges
// the batches in order.
//
// An Append that finds the log idle does not come here at all: it commits
// its event on its own goroutine (inline.go).
func (l *Log) commitLoop() {
	defer close(l.stopped)
	go l.ackLoop()
	for {
		l.syncSlots <- struct{}{} // released by ackLoop, or below
		p, ok := l.next()
		if !ok {
			<-l.syncSlots
			break
		}
		batch := make([]*pending, 1, 16)
		batch[0] = p
		size := p.size()
	drain:
		for len(batch) < l.opts.MaxBatch && size < l.opts.MaxBatchBytes {
			select {
			case q, ok := <-l.queue:
				if !ok {
					break drain
				}
				batch = append(batch, q)
				size += q.size()
			default:
				break drain
			}
		}
		if cap(l.syncSlots) == 1 {
			l.commitSolo(batch) // the one slot held is all of them
			<-l.syncSlots
			continue
		}
		l.commit(batch)
	}
	close(l.acks)
	<-l.acked
}

// next returns the next append to commit, false once Close closed the
// queue; the caller holds a sync slot, before and after. When none is
// waiting it first lets the journal zero-fill ahead (fillWhenIdle). It
// waits for the next append without the slot.
func (l *Log) next() (*pending, bool) {
	select {
	case p, ok := <-l.queue:
		return p, ok
	default:
	}
	l.fillWhenIdle()
	<-l.syncSlots
	p, ok := <-l.queue
	l.syncSlots <- struct{}{}
	return p, ok
}

// fillWhenIdle lets the journal zero-fill ahead while no append waits; the
// caller holds a sync slot: with the slot held (and one slot, no sync
// runs), a fill started now meets only the syncs of appends arriving while
// it runs. The fill is only an optimisation: it is skipped rather than
// wait while someone else holds the writer (a day closing).
func (l *Log) fillWhenIdle() {
	if len(l.queue) > 0 || !l.writeMu.TryLock() {
		return
	}
	if l.failure() == nil && l.fullErr() == nil {
		l.w.journal.fillAhead(l.w.end)
	}
	l.writeMu.Unlock()
}

// inflight is a journaled batch on its way to its acknowledgement: err is
// set when journaling it failed; otherwise sync makes it durable.
type inflight struct {
	batch []*pending
	job   batchJob
	err   error
	sync  func() error
	// synced carries sync's result when it runs beside the committer.
	synced chan error
}

// commit journals a batch and queues it for ackLoop, its sync running on
// a goroutine of its own so that several overlap (MaxSyncsInFlight > 1).
// The caller holds a sync slot, released by ackLoop or here.
func (l *Log) commit(batch []*pending) {
	in := l.journalBatch(batch)
	if in == nil {
		<-l.syncSlots
		return
	}
	if in.err == nil {
		in.synced = make(chan error, 1)
		go func() { in.synced <- l.syncBatch(in.sync) }()
	}
	l.inflight.Add(1)
	l.acks <- in // never blocks: it holds as many as there are sync slots
}

// commitSolo journals, syncs and acknowledges a batch on the calling
// goroutine. The caller holds every sync slot: no other batch is being
// journaled, synced or acknowledged, so this one is acknowledged in
// journal order, and a failure can be scrubbed at once.
func (l *Log) commitSolo(batch []*pending) {
	in := l.journalBatch(batch)
	if in == nil {
		return
	}
	err := in.err
	if err == nil {
		err = l.syncBatch(in.sync)
	}
	if err != nil {
		failed := l.batchFailed(in, err)
		l.scrubFailed() // before the appends learn that they failed
		l.refuse(in, failed)
		wake(in.batch)
		return
	}
	l.acknowledged(in)
}

// journalBatch writes a batch to the journal (commitBatch) and returns it
// for its sync, or nil when the batch is settled already (refused, all
// duplicates, or the disk full), its appends woken. A failed write fails
// the log; the batch is returned with the error, to fail in order behind
// the batches still syncing, which may yet be acknowledged: only then is
// it known where the acknowledged journal ends, and what a partial write
// left past it can be scrubbed. The caller holds a sync slot.
func (l *Log) journalBatch(batch []*pending) *inflight {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.failure(); err != nil {
		failAll(batch, err)
		wake(batch)
		return nil
	}
	if err := l.fullErr(); err != nil {
		failAll(batch, err)
		wake(batch)
		return nil
	}
	start := time.Now()
	job, err := l.commitBatch(batch)
	if err != nil && isNoSpace(err) && l.commitNoSpace(batch, err) {
		// Nothing of the batch was acknowledged nor left in the journal:
		// the log is full, not failed.
		return nil
	}
	if err != nil {
		_ = l.fail(err)
		return &inflight{batch: batch, err: fmt.Errorf("commit: %w", err)}
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		l.opts.Logger.Warn("audit log: slow commit", "events", len(batch), "duration", d.String())
	}
	if len(job.entries) == 0 { // all duplicates
		wake(batch)
		return nil
	}
	return &inflight{batch: batch, job: job, sync: l.w.journal.syncer()}
}

// syncBatch runs a batch's sync and observes its duration.
func (l *Log) syncBatch(sync func() error) error {
	start := time.Now()
	err := sync()
	l.syncSeconds.Observe(time.Since(start).Seconds())
	return err
}

// ackLoop acknowledges journaled batches in order, each once its sync
// returned: it hands the batch to the applier, then wakes its appends. A
// failed sync (or write) fails its batch and every later one: what follows
// a batch whose bytes may not be on disk cannot be trusted either. The
// failed batches' bytes are then scrubbed from the journal before their
// appends learn that they failed (scrubFailed).
func (l *Log) ackLoop() {
	var (
		failed   error
		scrubbed chan struct{}
	)
	defer func() {
		if scrubbed != nil {
			<-scrubbed // so that Close returns after the scrub
		}
		close(l.acked)
	}()
	for in := range l.acks {
		err := in.err
		if err == nil {
			err = <-in.synced
		}
		if failed == nil && err != nil {
			failed = l.batchFailed(in, err)
			// The scrub needs writeMu, which the committer may hold
			// while it waits for this loop (advanceTo): it runs beside.
			scrubbed = make(chan struct{})
			go func() {
				defer close(scrubbed)
				l.scrubFailed()
			}()
		}
		if failed != nil {
			l.refuse(in, failed)
			go func(batch []*pending, scrubbed <-chan struct{}) {
				<-scrubbed
				wake(batch)
			}(in.batch, scrubbed)
		} else {
			l.acknowledged(in)
		}
		<-l.syncSlots
		l.inflight.Done()
	}
}

// batchFailed fails the log for the first batch whose write or sync
// failed, and returns the error that fails it.
func (l *Log) batchFailed(in *inflight, err error) error {
	failed := l.fail(err)
	l.opts.Logger.Error("audit log: batch failed; refusing appends until reopened",
		"events", len(in.batch), "err", err)
	return failed
}

// refuse fails the appends of a batch that failed, or follows one that
// did; the caller wakes them once the journal is scrubbed.
func (l *Log) refuse(in *inflight, failed error) {
	failAll(in.batch, failed)
	l.apply.abandon(in.job.entries)
}

// acknowledged marks a synced batch durable, hands it to the applier and
// wakes its appends.
func (l *Log) acknowledged(in *inflight) {
	l.durable.Store(in.job.end)
	if err := l.apply.submit(in.job); err != nil {
		// The batch is durable (a reopen applies it); later ones are
		// refused.
		_ = l.fail(err)
	}
	l.stats.commits.Add(1)
	l.stats.events.Add(uint64(len(in.job.entries)))
	var sent, stored uint64
	for i := range in.job.entries {
		e := &in.job.entries[i]
		sent, stored = sent+e.reqLen+e.respLen, stored+e.storedLen
	}
	l.stats.bodyBytes.Add(sent)
	l.stats.storedBodyBytes.Add(stored)
	l.stats.journalBytes.Add(in.job.written)
	wake(in.batch)
}

// scrubFailed cuts the open journal at the acknowledged end once a batch
// failed, dropping what the committer wrote past it. Linux reports a
// writeback error once and may keep the failed pages readable, so without
// it a reopen in the same boot, even after a crash, could replay batches
// whose appends were told they failed. The acknowledged end no longer
// moves: ackLoop fails every later batch and advanceTo refuses to change
// day. The cut's own sync may fail too; the page cache then holds the
// shorter file until the journal is closed, which cuts it at the same end.
// If the cut itself fails it is logged, and the failed batches can still
// be replayed: the disk is failing, and the process should restart.
func (l *Log) scrubFailed() {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	end := l.durable.Load()
	if err := l.w.journal.scrub(end); err != nil {
		l.opts.Logger.Warn("audit log: could not scrub the failed batches from the journal",
			"day", l.w.day, "from", end, "err", err)
	}
}

// failure returns the error that failed the log, if any.
func (l *Log) failure() error {
	if p := l.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// fail records the first error that fails the log and returns it wrapped
// in ErrFailed.
func (l *Log) fail(err error) error {
	wrapped := fmt.Errorf("%w: %w", ErrFailed, err)
	if l.failed.CompareAndSwap(nil, &wrapped) {
		close(l.failedCh)
	}
	return l.failure()
}

func wake(batch []*pending) {
	for _, p := range batch {
		close(p.done)
	}
}

func failAll(batch []*pending, err error) {
	for _, p := range batch {
		if p.err == nil {
			p.err = err
			p.receipt, p.batch = Receipt{}, nil
		}
	}
}

// commitBatch journals the batch: it assigns sequences and leaf indices
// and writes every event with its leaf and bodies to the day's journal in
// one write. The batch is durable once the journal is next synced.
func (l *Log) commitBatch(batch []*pending) (batchJob, error) {
	if err := l.advanceTo(ids.Day(l.opts.Now())); err != nil {
		return batchJob{}, err
	}
	if err := l.w.journal.open(l.w.day, l.w.end); err != nil {
		return batchJob{}, err
	}
	if err := l.refuseDuplicates(batch); err != nil {
		return batchJob{}, err
	}
	entries := make([]entry, 0, len(batch))
	kept := make([]*pending, 0, len(batch))
	var times []string
	if l.opts.Signer != nil {
		times = make([]string, 0, len(batch))
	}
	lastSeq, sizes := l.w.lastSeq, map[string]uint64{}
	for _, p := range batch {
		if p.err != nil {
			continue
		}
		size, ok := sizes[p.tenant]
		if !ok {
			if size, ok = l.w.sizes[p.tenant]; !ok {
				var err error
				if size, err = l.treeSize(p.tenant); err != nil {
					return batchJob{}, err
				}
			}
		}
		seq := lastSeq + 1
		leafBytes := p.tpl.Bytes(seq)
		entries = append(entries, entry{tenant: p.tenant, requestID: p.requestID, seq: seq, leafIndex: size,
			leaf: leafBytes, leafHash: leaf.Hash(leafBytes),
			reqLen: uint64(p.reqLen), respLen: uint64(p.respLen), codec: p.codec})
		kept = append(kept, p)
		if times != nil {
			times = append(times, p.time)
		}
		sizes[p.tenant] = size + 1
		lastSeq = seq
	}
	if len(entries) == 0 {
		return batchJob{}, nil
	}
	// Signed before the write, so that the statement is journaled with
	// the batch (in its first frame) and the receipts can be served again
	// after a restart.
	signed, batchRec := l.signBatch(entries, times)
	buf := l.w.buf[:0]
	mark := frameMark{nonce: l.nonce, durable: l.durable.Load()}
	for i, p := range kept {
		e := &entries[i]
		if i == 0 {
			e.batch = batchRec
		}
		buf = appendRecord(buf, l.w.end, mark, e, p.stored)
		p.receipt = Receipt{Day: l.w.day, Sequence: e.seq, LeafIndex: e.leafIndex, LeafHash: e.leafHash}
		p.batch, p.batchIndex = signed, i
	}
	if cap(buf) <= 2*DefaultMaxBatchBytes {
		l.w.buf = buf
	}
	if err := l.w.journal.write(buf, l.w.end); err != nil {
		return batchJob{}, err
	}
	l.apply.journaled(entries)
	for tenant, size := range sizes {
		l.w.sizes[tenant] = size
	}
	l.w.lastSeq = lastSeq
	l.w.end += uint64(len(buf))
	return batchJob{day: l.w.day, end: l.w.end, lastSeq: l.w.lastSeq, entries: entries, written: uint64(len(buf))}, nil
}

// refuseDuplicates fails the appends whose request id is already in the
// log, journaled (synced or not) but not yet applied, or earlier in the
// batch. The unapplied set is read before audit.db: an id leaves it only
// once it is committed there.
func (l *Log) refuseDuplicates(batch []*pending) error {
	seen := make(map[string]struct{}, len(batch))
	unapplied := l.apply.unappliedIn(batch)
	for i, p := range batch {
		if _, dup := seen[string(p.requestID)]; dup || unapplied[i] {
			p.err = fmt.Errorf("%w: %s", ErrDuplicate, p.requestID)
			continue
		}
		seen[string(p.requestID)] = struct{}{}
	}
	return l.db.View(func(tx *bolt.Tx) error {
		requests := tx.Bucket(bucketRequests)
		for _, p := range batch {
			if p.err == nil && requests.Get(p.requestID) != nil {
				p.err = fmt.Errorf("%w: %s", ErrDuplicate, p.requestID)
			}
		}
		return nil
	})
}

// treeSize reads the size of a tenant's tree of the open day that this
// committer has not appended to since Open: audit.db then holds all of it
// (recover applied the journal before the committer started).
func (l *Log) treeSize(tenant string) (uint64, error) {
	var size uint64
	err := l.db.View(func(tx *bolt.Tx) error {
		t, err := loadTree(tx, l.w.day, tenant)
		if err == nil {
			size = t.size
		}
		return err
	})
	return size, err
}

// advanceTo moves the open day forward to day (the clock never moves it
// back), persisting it in a transaction of its own, before any journal of
// day exists. Caller holds writeMu.
func (l *Log) advanceTo(day string) error {
	if day <= l.w.day {
		return nil
	}
	l.inflight.Wait() // the previous day's batches are acknowledged, its file synced
	if err := l.failure(); err != nil {
		// A failed log stays on its day: its journal is cut at the
		// acknowledged end when closed (Close).
		return err
	}
	var lastSeq, end uint64
	err := l.db.Update(func(tx *bolt.Tx) error {
		lastSeq, end = parseDayState(tx.Bucket(bucketSeq).Get([]byte(day)))
		return tx.Bucket(bucketMeta).Put(metaCurrentDay, []byte(day))
	})
	if err != nil {
		return fmt.Errorf("audit log: open day %s: %w", day, err)
	}
	if err := l.w.journal.close(l.w.end); err != nil {
		return err
	}
	l.w.day, l.w.lastSeq, l.w.end, l.w.sizes = day, lastSeq, end, map[string]uint64{}
	l.durable.Store(end) // applied, so synced
	return nil
}
