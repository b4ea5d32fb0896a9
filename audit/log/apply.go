package log

import (
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The applier stores what the committer journaled into audit.db, behind
// the acknowledgement: events, request index, tree nodes and states, and
// each day's state (last sequence, journal end applied), in one bbolt
// transaction for whatever was journaled since the previous one. audit.db
// is thus derived state; recover replays the journal past the applied end
// on open, through the same applyTx.
//
// A bbolt commit writes pages and syncs twice on the disk the journal
// syncs on; a journal sync that overlaps it waits for bbolt's writes too.
// Each commit has a fixed cost (about 1.5 ms here, whatever its size) and
// a small one per event, so the applier runs rarely, in large rounds: at
// most once per ApplyInterval (default 10 s), at once when the backlog
// reaches applyEager events, when a reader waits for it, and on Close.
// Fewer, larger rounds overlap fewer journal syncs (docs/audit-format.md,
// "Performance"). Readers that must see every acknowledged event (Event,
// InclusionProof, head signing, forwarding, pruning) first wait for it to
// catch up (caughtUp).

// maxApplyBacklog bounds the journaled events waiting for the applier; the
// committer waits for room beyond it, so memory stays bounded when bbolt
// falls behind the journal.
const maxApplyBacklog uint64 = 1 << 16

// applyEager is the backlog at which the applier runs without waiting for
// ApplyInterval.
const applyEager uint64 = 8192

// batchJob is one journaled batch for the applier.
type batchJob struct {
	day     string
	end     uint64 // journal end after the batch
	lastSeq uint64 // day's last sequence after the batch
	entries []entry
	written uint64 // the batch's bytes in the journal (the committer's)
}

type applier struct {
	interval time.Duration
	// wake tells the applier goroutine to look at its state again.
	wake chan struct{}

	mu   sync.Mutex
	cond *sync.Cond // broadcast when progress is made, or on failure
	jobs []batchJob
	// waiters are the caughtUp calls waiting.
	waiters int
	// unapplied holds the request ids journaled but not yet in audit.db,
	// so that a duplicate is refused before it reaches the journal. The
	// committer adds a batch's ids once it is written, before its sync
	// returns: with several syncs in flight the next batch is journaled
	// while earlier ones sync.
	unapplied map[string]struct{}
	// written and applied count events since Open: handed to the applier,
	// and committed to audit.db; the difference is the backlog.
	written, applied uint64
	err              error // a failed transaction: the applier stops
	// full is the error of a round kept for lack of space, until it is
	// applied: readers waiting for the applier are told ErrDiskFull.
	full   error
	closed bool
	done   chan struct{}

	// trees caches tree states; the applier goroutine (or recover, before
	// it starts) alone uses it.
	trees map[treeID]*tree
}

// treeID names a tree: its day and tenant.
type treeID struct{ day, tenant string }

func newApplier(interval time.Duration) *applier {
	a := &applier{interval: interval, wake: make(chan struct{}, 1),
		unapplied: map[string]struct{}{}, done: make(chan struct{}), trees: map[treeID]*tree{}}
	a.cond = sync.NewCond(&a.mu)
	return a
}

// poke wakes the applier goroutine without blocking.
func (a *applier) poke() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// backlog is the events journaled and not yet committed to audit.db.
// Caller holds mu.
func (a *applier) backlog() uint64 { return a.written - a.applied }

// submit hands a journaled batch to the applier, waiting while the backlog
// is full. It returns the applier's error, if it failed.
func (a *applier) submit(job batchJob) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.backlog() >= maxApplyBacklog && a.err == nil {
		a.cond.Wait()
	}
	a.jobs = append(a.jobs, job)
	a.written += uint64(len(job.entries))
	if len(a.jobs) == 1 || a.backlog() >= applyEager {
		a.poke()
	}
	return a.err
}

// journaled adds the request ids of a batch just written to the journal
// to the unapplied set, until the applier stores them (or the batch's sync
// fails: abandon). The committer alone adds to the set, after checking
// it (refuseDuplicates), so no id can join it in between.
func (a *applier) journaled(entries []entry) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range entries {
		a.unapplied[string(entries[i].requestID)] = struct{}{}
	}
}

// abandon drops the request ids of a batch whose sync failed from the
// unapplied set: it never reaches the applier.
func (a *applier) abandon(entries []entry) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range entries {
		delete(a.unapplied, string(entries[i].requestID))
	}
}

// unappliedIn reports, for each append of batch, whether its request id is
// journaled but not yet applied.
func (a *applier) unappliedIn(batch []*pending) []bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]bool, len(batch))
	for i, p := range batch {
		_, out[i] = a.unapplied[string(p.requestID)]
	}
	return out
}

// caughtUp waits until every event journaled before the call is in
// audit.db, and returns the applier's error if it failed.
func (a *applier) caughtUp() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	target := a.written
	if a.applied < target {
		a.waiters++
		a.poke()
		for a.applied < target && a.err == nil && !a.closed && a.full == nil {
			a.cond.Wait()
		}
		a.waiters--
	}
	if a.err != nil {
		return fmt.Errorf("%w: %w", ErrFailed, a.err)
	}
	if a.applied < target && a.full != nil {
		return fmt.Errorf("%w: %w", ErrDiskFull, a.full)
	}
	if a.applied < target {
		return ErrClosed
	}
	return nil
}

// close stops the applier once it has applied every submitted job.
func (a *applier) close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.poke()
	<-a.done
}

// next waits until it is time to apply and takes the jobs; none means the
// applier is closed and drained.
func (a *applier) next(last time.Time) []batchJob {
	a.mu.Lock()
	defer a.mu.Unlock()
	for {
		if len(a.jobs) > 0 {
			wait := a.interval - time.Since(last)
			if a.closed || a.waiters > 0 || a.backlog() >= applyEager || wait <= 0 {
				jobs := a.jobs
				a.jobs = nil
				return jobs
			}
			a.mu.Unlock()
			t := time.NewTimer(wait)
			select {
			case <-a.wake:
			case <-t.C:
			}
			t.Stop()
			a.mu.Lock()
			continue
		}
		if a.closed {
			return nil
		}
		a.mu.Unlock()
		<-a.wake
		a.mu.Lock()
	}
}

// applyLoop applies jobs until close, each round one transaction.
func (l *Log) applyLoop() {
	a := l.apply
	defer close(a.done)
	var last time.Time
	for {
		jobs := a.next(last)
		if len(jobs) == 0 {
			return // closed and drained
		}
		start := time.Now()
		last = start
		err := l.db.Update(func(tx *bolt.Tx) error { return a.applyTx(tx, jobs) })
		n := 0
		for _, j := range jobs {
			n += len(j.entries)
		}
		if err != nil && isNoSpace(err) && l.keepForSpace(jobs, err) {
			continue
		}
		a.mu.Lock()
		if err != nil {
			a.err = err
			a.trees = map[treeID]*tree{} // may hold the failed transaction's appends
		} else {
			for _, j := range jobs {
				for i := range j.entries {
					delete(a.unapplied, string(j.entries[i].requestID))
				}
			}
			a.applied += uint64(n)
			a.full = nil
		}
		a.cond.Broadcast()
		a.mu.Unlock()
		if err != nil {
			l.opts.Logger.Error("audit log: applying the journal to audit.db failed; refusing appends until reopened",
				"events", n, "err", err)
			return
		}
		l.stats.applies.Add(1)
		if d := time.Since(start); d > time.Second {
			l.opts.Logger.Warn("audit log: slow apply", "events", n, "duration", d.String())
		}
	}
}

// applyTx stores jobs in tx: each event's record and request index, its
// leaf in the tenant's tree (with the nodes it completes), then the touched
// tree states and each day's state.
func (a *applier) applyTx(tx *bolt.Tx, jobs []batchJob) error {
	n := 0
	for _, j := range jobs {
		n += len(j.entries)
	}
	events := newPuts(bucketEvents, "event", true, n)
	requests := newPuts(bucketRequests, "request index", false, n)
	leaves := newPuts(bucketLeaves, "leaf index", true, n)
	nodes := newPuts(bucketNodes, "tree node", true, 2*n)
	batches := newPuts(bucketBatches, "batch statement", true, len(jobs))
	touched := map[*tree]struct{}{}
	days := map[string]batchJob{}
	step := 0
	for _, j := range jobs {
		for i := range j.entries {
			yieldEvery(step)
			step++
			e := &j.entries[i]
			t, err := a.tree(tx, j.day, e.tenant)
			if err != nil {
				return err
			}
			if e.leafIndex != t.size {
				return fmt.Errorf("audit log: %s is leaf %d of %s/%s, whose tree has %d",
					e.requestID, e.leafIndex, j.day, e.tenant, t.size)
			}
			key := eventKey(j.day, e.seq)
			events.add(key, e.record().encode())
			requests.add(e.requestID, key)
			leaves.add(leafKey(j.day, e.tenant, e.leafIndex), leafValue(e.seq, e.requestID))
			if e.batch != nil {
				batches.add(key, e.batch)
			}
			if err := t.append(nodes.add, e.leafHash); err != nil {
				return err
			}
			t.lastSeq = e.seq
			touched[t] = struct{}{}
		}
		days[j.day] = j // jobs come in order: the last of a day wins
	}
	for _, p := range []*puts{events, requests, leaves, nodes, batches} {
		if err := p.store(tx); err != nil {
			return err
		}
	}
	seq := tx.Bucket(bucketSeq)
	for day, j := range days {
		if err := seq.Put([]byte(day), dayState(j.lastSeq, j.end)); err != nil {
			return fmt.Errorf("audit log: store day state: %w", err)
		}
	}
	trees := tx.Bucket(bucketTrees)
	for t := range touched {
		if err := trees.Put(treeKey(t.day, t.tenant), t.encode()); err != nil {
			return fmt.Errorf("audit log: store tree state: %w", err)
		}
	}
	return nil
}

// tree returns the cached state of a tree, loading it. Trees of days
// before the newest one asked for are dropped: days only move forward.
func (a *applier) tree(tx *bolt.Tx, day, tenant string) (*tree, error) {
	k := treeID{day, tenant}
	if t, ok := a.trees[k]; ok {
		return t, nil
	}
	for key, t := range a.trees {
		if t.day < day {
			delete(a.trees, key)
		}
	}
	t, err := loadTree(tx, day, tenant)
	if err != nil {
		return nil, err
	}
	a.trees[k] = t
	return t, nil
}

// keepForSpace puts back a round whose transaction failed for lack of
// space, for a retry once the log's disk has room (bbolt rolled the
// transaction back; the journal holds the events, acknowledged). It waits
// for the full state to end, or for Close, and reports false when closed:
// the round then stays in the journal alone, replayed at the next open.
func (l *Log) keepForSpace(jobs []batchJob, err error) bool {
	a := l.apply
	// Appends are refused before readers are told: a reader that sees
	// ErrDiskFull must find appends refused too.
	l.enterFull(err)
	a.mu.Lock()
	a.jobs = append(jobs, a.jobs...)
	a.trees = map[treeID]*tree{} // may hold the failed transaction's appends
	a.full = err
	a.cond.Broadcast()
	closed := a.closed
	a.mu.Unlock()
	if closed {
		l.opts.Logger.Warn("audit log: closing with journaled events not in audit.db for lack of space; the next open applies them",
			"err", err)
		return false
	}
	l.opts.Logger.Warn("audit log: applying the journal to audit.db failed for lack of space; retrying once space returns", "err", err)
	for {
		select {
		case <-l.spaceBack():
			return true
		case <-a.wake:
			a.mu.Lock()
			closed := a.closed
			a.mu.Unlock()
			if closed {
				return false
			}
		}
	}
}
