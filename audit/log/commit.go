package log

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/audit/ids"
	"github.com/tollgate-dev/tollgate/audit/leaf"
)

// commitLoop is the committer: it takes whatever is queued (at least one
// append, at most MaxBatch appends or MaxBatchBytes) and commits it as one
// batch, until Close closes the queue.
func (l *Log) commitLoop() {
	defer close(l.stopped)
	batch := make([]*pending, 0, l.opts.MaxBatch)
	for p := range l.queue {
		batch = append(batch[:0], p)
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
		l.commit(batch)
		clear(batch)
	}
}

// commit makes a batch durable and wakes its callers. A failure fails the
// batch and every later append (ErrFailed).
func (l *Log) commit(batch []*pending) {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	defer func() {
		for _, p := range batch {
			close(p.done)
		}
	}()
	if l.w.failed != nil {
		failAll(batch, l.w.failed)
		return
	}
	start := time.Now()
	if err := l.commitBatch(batch); err != nil {
		l.w.failed = fmt.Errorf("%w: %w", ErrFailed, err)
		failAll(batch, l.w.failed)
		l.opts.Logger.Error("audit log: commit failed; refusing appends until reopened",
			"events", len(batch), "err", err)
		return
	}
	l.stats.commits.Add(1)
	for _, p := range batch {
		if p.err == nil {
			l.stats.events.Add(1)
		}
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		l.opts.Logger.Warn("audit log: slow commit", "events", len(batch), "duration", d.String())
	}
}

func failAll(batch []*pending, err error) {
	for _, p := range batch {
		if p.err == nil {
			p.err = err
			p.receipt = Receipt{}
		}
	}
}

// commitBatch journals the batch: it assigns sequences and leaf indices,
// writes every event with its leaf and bodies to the day's journal in one
// write, fsyncs it once, and hands the batch to the applier. The batch is
// durable once the sync returned.
func (l *Log) commitBatch(batch []*pending) error {
	if err := l.advanceTo(ids.Day(l.opts.Now())); err != nil {
		return err
	}
	if err := l.w.journal.open(l.w.day, l.w.end); err != nil {
		return err
	}
	if err := l.refuseDuplicates(batch); err != nil {
		return err
	}
	buf := l.w.buf[:0]
	entries := make([]entry, 0, len(batch))
	for _, p := range batch {
		if p.err != nil {
			continue
		}
		size, ok := l.w.sizes[p.tenant]
		if !ok {
			var err error
			if size, err = l.treeSize(p.tenant); err != nil {
				return err
			}
		}
		seq := l.w.lastSeq + 1
		leafBytes := p.tpl.Bytes(seq)
		e := entry{tenant: p.tenant, requestID: p.requestID, seq: seq, leafIndex: size,
			leaf: leafBytes, leafHash: leaf.Hash(leafBytes),
			reqLen: uint64(p.reqLen), respLen: uint64(len(p.bodies) - p.reqLen)}
		buf = appendRecord(buf, l.w.end, &e, p.bodies)
		entries = append(entries, e)
		p.receipt = Receipt{Day: l.w.day, Sequence: seq, LeafIndex: size, LeafHash: e.leafHash}
		l.w.sizes[p.tenant] = size + 1
		l.w.lastSeq = seq
	}
	if cap(buf) <= 2*DefaultMaxBatchBytes {
		l.w.buf = buf
	}
	if len(entries) == 0 {
		return nil
	}
	if err := l.w.journal.write(buf, l.w.end); err != nil {
		return err
	}
	if err := l.w.journal.sync(); err != nil {
		return err
	}
	l.w.end += uint64(len(buf))
	if err := l.apply.submit(batchJob{day: l.w.day, end: l.w.end, lastSeq: l.w.lastSeq, entries: entries}); err != nil {
		// The batch is durable (a reopen applies it); later ones are refused.
		l.w.failed = fmt.Errorf("%w: %w", ErrFailed, err)
	}
	return nil
}

// refuseDuplicates fails the appends whose request id is already in the
// log, journaled but not yet applied, or earlier in the batch. The
// unapplied set is read before audit.db: an id leaves it only once it is
// committed there.
func (l *Log) refuseDuplicates(batch []*pending) error {
	seen := make(map[string]struct{}, len(batch))
	for _, p := range batch {
		if _, dup := seen[string(p.requestID)]; dup || l.apply.isUnapplied(p.requestID) {
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
	var lastSeq, end uint64
	err := l.db.Update(func(tx *bolt.Tx) error {
		lastSeq, end = parseDayState(tx.Bucket(bucketSeq).Get([]byte(day)))
		return tx.Bucket(bucketMeta).Put(metaCurrentDay, []byte(day))
	})
	if err != nil {
		return fmt.Errorf("audit log: open day %s: %w", day, err)
	}
	if err := l.w.journal.close(); err != nil {
		return err
	}
	l.w.day, l.w.lastSeq, l.w.end, l.w.sizes = day, lastSeq, end, map[string]uint64{}
	return nil
}
