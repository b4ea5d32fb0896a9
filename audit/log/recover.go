package log

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/audit/leaf"
	"github.com/tollgate-dev/tollgate/internal/durable"
)

// replayBatch bounds the events replayed in one bbolt transaction.
const replayBatch = 4096

// recover applies to audit.db whatever each day's journal holds past the
// end audit.db records as applied: the batches acknowledged (and perhaps
// more that were being written) before a crash. A torn last frame, from a
// write the crash interrupted, was never acknowledged; it is cut off (its
// bytes kept beside the journal for inspection), as is the zero-filled
// space past the frames, unless a later frame of this log proves the
// bytes had been acknowledged (ErrJournalDamaged). A journal is synced
// before audit.db records any of it. It runs in Open, before the applier
// and the committer start.
func (l *Log) recover() error {
	dir := l.journalDir
	days, err := journalDays(dir)
	if err != nil {
		return err
	}
	if err := l.checkNoJournalMissing(dir, days); err != nil {
		return err
	}
	for _, day := range days {
		if err := l.replayDay(dir, day); err != nil {
			return err
		}
	}
	if l.w.day == "" {
		return nil
	}
	return l.db.View(func(tx *bolt.Tx) error {
		l.w.lastSeq, l.w.end = parseDayState(tx.Bucket(bucketSeq).Get([]byte(l.w.day)))
		l.durable.Store(l.w.end) // applied, so synced
		return nil
	})
}

// checkNoJournalMissing refuses a journal directory that lacks the file of
// a day audit.db has applied bytes of and has not pruned: its bodies are
// gone, and appends to the open day would fail. It is a journal directory
// restored or copied from before those days, or the wrong one.
func (l *Log) checkNoJournalMissing(dir string, days []string) error {
	present := make(map[string]bool, len(days))
	for _, day := range days {
		present[day] = true
	}
	return l.db.View(func(tx *bolt.Tx) error {
		pruned := tx.Bucket(bucketPruned)
		return tx.Bucket(bucketSeq).ForEach(func(k, v []byte) error {
			day := string(k)
			_, applied := parseDayState(v)
			if applied == 0 || present[day] || pruned.Get(k) != nil {
				return nil
			}
			return fmt.Errorf("%w: %s has no journal of %s, of which %s applied %d bytes: its bodies are not there. Is this the log's journal directory, as it was (not a copy or a restored backup)?",
				ErrWrongJournal, dir, day, FileName, applied)
		})
	})
}

// replaySync makes a journal durable before recovery applies it; tests
// replace it to see a failing sync stop the replay.
var replaySync = durable.DataSync

// replayDay replays one day's journal past its applied end.
func (l *Log) replayDay(dir, day string) error {
	var lastSeq, applied uint64
	pruned := false
	if err := l.db.View(func(tx *bolt.Tx) error {
		lastSeq, applied = parseDayState(tx.Bucket(bucketSeq).Get([]byte(day)))
		pruned = tx.Bucket(bucketPruned).Get([]byte(day)) != nil
		return nil
	}); err != nil {
		return fmt.Errorf("audit log: read state of %s: %w", day, err)
	}
	if pruned {
		return nil // its file outlived a crash during Prune, which deletes it
	}
	path := journalPath(dir, day)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("audit log: journal: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("audit log: journal: %w", err)
	}
	size := uint64(info.Size())
	switch {
	case size == applied:
		return nil
	case size < applied:
		return fmt.Errorf("audit log: journal %s holds %d bytes but %d were applied: it lost acknowledged events", path, size, applied)
	}
	// The bytes past the applied end may be only in the page cache: those
	// of a batch whose sync the crash interrupted. audit.db must not
	// record frames that a power loss could still take from the journal:
	// the next Open would find the journal shorter than what was applied
	// (or, zero-filled, read zeros for the bodies).
	if err := replaySync(f); err != nil {
		return fmt.Errorf("audit log: sync %s before replaying it: %w", path, err)
	}
	job := batchJob{day: day, end: applied, lastSeq: lastSeq}
	flush := func() error {
		if len(job.entries) == 0 {
			return nil
		}
		if err := l.db.Update(func(tx *bolt.Tx) error { return l.apply.applyTx(tx, []batchJob{job}) }); err != nil {
			return fmt.Errorf("audit log: replay %s: %w", path, err)
		}
		job.entries = job.entries[:0]
		return nil
	}
	off, replayed := applied, 0
	var buf []byte
	var torn error
	for {
		var e entry
		var next uint64
		e, next, buf, err = readRecord(f, off, buf)
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, errTorn) {
			torn = err
			break
		}
		if err != nil {
			return fmt.Errorf("audit log: replay %s: %w", path, err)
		}
		if e.mark != (frameMark{}) && e.mark.nonce != l.nonce {
			return fmt.Errorf("audit log: journal %s holds a frame of another log at offset %d (its nonce is not this %s's)", path, off, FileName)
		}
		if e.seq != job.lastSeq+1 {
			return fmt.Errorf("audit log: journal %s holds sequence %d after %d", path, e.seq, job.lastSeq)
		}
		e.leafHash = leaf.Hash(e.leaf)
		job.entries = append(job.entries, e)
		job.lastSeq, job.end, off = e.seq, next, next
		replayed++
		if len(job.entries) == replayBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if off < size {
		tail, err := readTail(f, path, off, size)
		if err != nil {
			return err
		}
		reason := "data after the zero-filled space"
		if torn != nil {
			reason = torn.Error()
		}
		scan := scanTail(tail, off, job.lastSeq, l.nonce)
		if scan.proved {
			return fmt.Errorf("%w: %s cannot be read from offset %d (%s), yet its frame at %d was written once the journal was durable through %d. "+
				"The file is left as it is: restore it, or keep a copy and truncate it to %d bytes to give up the events from there on (docs/audit-format.md, \"Crash recovery\")",
				ErrJournalDamaged, path, off, reason, scan.at, scan.durable, off)
		}
		kept, err := cutTail(f, path, off, tail[:scan.keep])
		if err != nil {
			return err
		}
		if kept > 0 {
			l.opts.Logger.Warn("audit log: cut a torn journal tail (a write interrupted by a crash, never acknowledged)",
				"journal", path, "offset", off, "bytes", kept, "reason", reason)
		}
	}
	l.stats.replayed.Add(uint64(replayed))
	if replayed > 0 {
		l.opts.Logger.Info("audit log: journal replayed", "day", day, "events", replayed, "last_sequence", job.lastSeq)
	}
	return nil
}

// readTail returns f's bytes from off to size: frames recovery could not
// read, then space zero-filled ahead of them.
func readTail(f *os.File, path string, off, size uint64) ([]byte, error) {
	tail := make([]byte, size-off)
	if _, err := f.ReadAt(tail, int64(off)); err != nil {
		return nil, fmt.Errorf("audit log: read the tail of %s: %w", path, err)
	}
	return tail, nil
}

// tailScan is what scanTail found in a journal's unreadable tail.
type tailScan struct {
	// proved: the frame at at, of this log, was written once the journal
	// was durable through durable, past the tail's start.
	proved      bool
	at, durable uint64
	// keep is how much of the tail to keep beside the journal when it is
	// cut: up to its last non-zero byte, or the end of the last frame of
	// this log found in it if that is further (a frame may end in zeros).
	keep int
}

// scanTail looks in tail, the journal's bytes from off on that recovery
// could not read as frames after sequence lastSeq, for frames of this log
// (carrying nonce). One whose batch was written once the journal was
// durable past off proves that the bytes at off had been acknowledged. A
// frame is trusted as proof only if it follows on from what was replayed
// (a sequence past the unreadable frame's) and records no durable end past
// its own start.
func scanTail(tail []byte, off, lastSeq uint64, nonce [nonceLen]byte) tailScan {
	scan := tailScan{keep: len(bytes.TrimRight(tail, "\x00"))}
	r := bytes.NewReader(tail)
	var buf []byte
	for from := 0; ; {
		i := bytes.Index(tail[from:], nonce[:])
		if i < 0 {
			return scan
		}
		from += i + 1
		// The nonce follows the frame header and the version byte.
		start := from - 1 - 1 - frameHeaderLen
		if start < 0 {
			continue
		}
		e, next, nbuf, err := readRecord(r, uint64(start), buf)
		buf = nbuf
		if err != nil || e.mark.nonce != nonce {
			continue
		}
		scan.keep = max(scan.keep, int(next))
		at := off + uint64(start)
		if e.seq > lastSeq+1 && e.mark.durable > off && e.mark.durable <= at {
			scan.proved, scan.at, scan.durable = true, at, e.mark.durable
			return scan
		}
	}
}

// cutTail truncates f to off, durably, first keeping tail, if any, in a
// file beside it: <journal>.torn-<off>, or with -2, -3, … added when an
// earlier crash left a tail cut at the same offset. It returns how many
// bytes it kept.
func cutTail(f *os.File, path string, off uint64, tail []byte) (int, error) {
	if len(tail) > 0 {
		keep := path + ".torn-" + strconv.FormatUint(off, 10)
		for n := 2; ; n++ {
			err := durable.Create(keep, tail, 0o600)
			if err == nil {
				break
			}
			if !errors.Is(err, fs.ErrExist) || n > 1000 {
				return 0, fmt.Errorf("audit log: keep the torn tail: %w", err)
			}
			keep = path + ".torn-" + strconv.FormatUint(off, 10) + "-" + strconv.Itoa(n)
		}
		// The copy's name must be durable before the bytes it keeps leave
		// the journal: they may be the only copy of acknowledged events.
		if err := syncDir(filepath.Dir(path)); err != nil {
			return 0, err
		}
	}
	if err := f.Truncate(int64(off)); err != nil {
		return 0, fmt.Errorf("audit log: cut the tail of %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("audit log: sync %s: %w", path, err)
	}
	return len(tail), syncDir(filepath.Dir(path))
}
