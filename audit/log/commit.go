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
	prev := l.w
	if err := l.commitBatch(batch); err != nil {
		l.w.day, l.w.lastSeq, l.w.bodyEnd, l.w.trees = prev.day, prev.lastSeq, prev.bodyEnd, map[string]*tree{}
		l.w.failed = fmt.Errorf("%w: %w", ErrFailed, err)
		failAll(batch, l.w.failed)
		l.opts.Logger.Error("audit log: commit failed; refusing appends until reopened",
			"events", len(batch), "err", err)
		return
	}
	l.stats.commits.Add(1)
	l.stats.events.Add(uint64(len(batch)))
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

// commitBatch appends the batch's bodies to the open day's body file and,
// while that file syncs, stores the events in one bbolt transaction (whose
// commit syncs the bbolt file). The batch is durable once both returned.
func (l *Log) commitBatch(batch []*pending) error {
	if err := l.advanceTo(ids.Day(l.opts.Now())); err != nil {
		return err
	}
	if err := l.w.body.open(l.w.day, l.w.bodyEnd); err != nil {
		return err
	}
	buf := l.w.buf[:0]
	for _, p := range batch {
		p.bodyOff = l.w.bodyEnd + uint64(len(buf))
		buf = append(buf, p.bodies...)
	}
	if cap(buf) <= 2*DefaultMaxBatchBytes {
		l.w.buf = buf
	}
	if err := l.w.body.write(buf, l.w.bodyEnd); err != nil {
		return err
	}
	synced := make(chan error, 1)
	go func() { synced <- l.w.body.sync() }()
	end := l.w.bodyEnd + uint64(len(buf))
	err := l.db.Update(func(tx *bolt.Tx) error { return l.store(tx, batch, end) })
	if syncErr := <-synced; err == nil {
		err = syncErr
	}
	return err
}

// store writes a batch in the open day: it assigns sequences, stores each
// event record, its request id and its leaf in the tenant's tree, then the
// day's state (last sequence, body file end) and the touched tree states.
func (l *Log) store(tx *bolt.Tx, batch []*pending, bodyEnd uint64) error {
	day := l.w.day
	events, requests, nodes := tx.Bucket(bucketEvents), tx.Bucket(bucketRequests), tx.Bucket(bucketNodes)
	events.FillPercent, nodes.FillPercent = 0.95, 0.95 // their keys only grow
	touched := map[*tree]struct{}{}
	for _, p := range batch {
		if requests.Get(p.requestID) != nil {
			p.err = fmt.Errorf("%w: %s", ErrDuplicate, p.requestID)
			continue
		}
		t, err := l.tree(tx, day, p.tenant)
		if err != nil {
			return err
		}
		seq := l.w.lastSeq + 1
		leafBytes := p.tpl.Bytes(seq)
		leafHash := leaf.Hash(leafBytes)
		key := eventKey(day, seq)
		rec := eventRecord{leafIndex: t.size, bodyOff: p.bodyOff,
			reqLen: uint64(p.reqLen), respLen: uint64(len(p.bodies) - p.reqLen), leaf: leafBytes}
		if err := events.Put(key, rec.encode()); err != nil {
			return fmt.Errorf("audit log: store event: %w", err)
		}
		if err := requests.Put(p.requestID, key); err != nil {
			return fmt.Errorf("audit log: index request: %w", err)
		}
		p.receipt = Receipt{Day: day, Sequence: seq, LeafIndex: t.size, LeafHash: leafHash}
		if err := t.append(nodes, leafHash); err != nil {
			return err
		}
		t.lastSeq = seq
		l.w.lastSeq = seq
		touched[t] = struct{}{}
	}
	l.w.bodyEnd = bodyEnd
	if err := tx.Bucket(bucketSeq).Put([]byte(day), dayState(l.w.lastSeq, bodyEnd)); err != nil {
		return fmt.Errorf("audit log: store day state: %w", err)
	}
	trees := tx.Bucket(bucketTrees)
	for t := range touched {
		if err := trees.Put(treeKey(t.day, t.tenant), t.encode()); err != nil {
			return fmt.Errorf("audit log: store tree state: %w", err)
		}
	}
	return nil
}

// advanceTo moves the open day forward to day (the clock never moves it
// back), persisting it in a transaction of its own. Caller holds writeMu.
func (l *Log) advanceTo(day string) error {
	if day <= l.w.day {
		return nil
	}
	var lastSeq, bodyEnd uint64
	err := l.db.Update(func(tx *bolt.Tx) error {
		lastSeq, bodyEnd = parseDayState(tx.Bucket(bucketSeq).Get([]byte(day)))
		return tx.Bucket(bucketMeta).Put(metaCurrentDay, []byte(day))
	})
	if err != nil {
		return fmt.Errorf("audit log: open day %s: %w", day, err)
	}
	l.w.day, l.w.lastSeq, l.w.bodyEnd, l.w.trees = day, lastSeq, bodyEnd, map[string]*tree{}
	return nil
}

// tree returns the cached state of a tree of the open day, loading it.
func (l *Log) tree(tx *bolt.Tx, day, tenant string) (*tree, error) {
	k := string(treeKey(day, tenant))
	if t, ok := l.w.trees[k]; ok {
		return t, nil
	}
	t, err := loadTree(tx, day, tenant)
	if err != nil {
		return nil, err
	}
	l.w.trees[k] = t
	return t, nil
}
