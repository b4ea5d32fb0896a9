// Package log is the appliance's durable audit log, in a directory under
// the data directory: a journal of one append-only file per UTC day holding
// every event with its leaf and bodies (deleted once past retention), in
// a subdirectory or a directory of its own (Options.JournalDir), and a
// bbolt file derived from it holding every event's leaf, one RFC 6962
// Merkle tree per tenant and UTC day, and the signed heads of those trees.
//
// Append returns only once the event and its bodies are fsynced in the
// journal. Concurrent appends are group-committed by a single committer
// goroutine fed through a bounded queue: one journal write and one
// fdatasync per batch of whatever arrived while the previous batch was
// being written. An append that finds the log idle commits its own batch
// on its goroutine instead, without waking another (inline.go). The
// committer assigns sequence numbers (from 1 each UTC day per appliance)
// and writes them in the journal in order, so they have no gap and no
// duplicate across restarts and crashes. An applier stores the journaled
// batches in bbolt behind the acknowledgement; on open the journal past
// what bbolt holds is replayed. A stream records its start before its
// first byte (Start, starts.go), so that one cut by a crash is recorded as
// interrupted at the next open (interrupted.go).
// docs/audit-format.md describes the layout.
package log

import (
	"crypto/rand"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/tollgate-dev/tollgate/internal/dirlock"
	"github.com/tollgate-dev/tollgate/internal/durable"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// FileName is the bbolt file of the log in its directory.
const FileName = "audit.db"

// Log is an open audit log. Its methods are safe for concurrent use.
type Log struct {
	opts Options
	dir  string
	db   *bolt.DB
	// journalDir is the journal's directory (Options.JournalDir resolved);
	// journalLock is its lock, held while the log is open.
	journalDir  string
	journalLock *dirlock.Lock

	// closeMu guards closed and sends on queue against Close.
	closeMu sync.RWMutex
	closed  bool
	queue   chan *pending
	stopped chan struct{} // closed when the committer has exited

	// syncSlots holds a token per batch journaled and not yet
	// acknowledged: its capacity bounds the syncs in flight. acks carries
	// those batches to ackLoop, in order; acked is closed when ackLoop has
	// exited.
	syncSlots chan struct{}
	acks      chan *inflight
	acked     chan struct{}
	inflight  sync.WaitGroup // batches journaled and not yet acknowledged
	// failed is the error that failed the log: appends are refused after.
	// failedCh is closed when it is set.
	failed   atomic.Pointer[error]
	failedCh chan struct{}
	// full is the full-disk state (diskfull.go).
	full diskFull

	apply *applier
	// starts is the start file of streams (starts.go), set once Open has
	// recorded the streams a crash interrupted.
	starts *starts

	// certHash is the SHA-256 of the signer's certificate (DER), stored
	// in audit.db at open: batch records name it (receipts.go).
	certHash [32]byte

	// nonce is the log's journal nonce, read at Open (see frameMark).
	nonce [nonceLen]byte
	// durable is the end of the open day's journal that the log has
	// acknowledged: ackLoop advances it, advanceTo and recover set it
	// when the committer starts on a day's journal.
	durable atomic.Uint64

	// writeMu serialises the committer's transactions with day closing;
	// it guards w.
	writeMu sync.Mutex
	w       writerState

	// headMu serialises head signing, so a tree's heads are stored in order.
	headMu sync.Mutex

	stats stats
	// appendSeconds observes every Append's duration.
	appendSeconds prometheus.Histogram
	// syncSeconds observes every journal fdatasync of a batch.
	syncSeconds prometheus.Histogram
}

// writerState is the committer's view of the open day.
type writerState struct {
	day     string // the open UTC day; "" before the first event
	lastSeq uint64 // last sequence assigned in day
	end     uint64 // end of day's journal
	// sizes are the sizes of the trees of day this committer appended to.
	sizes   map[string]uint64
	journal journalFile // day's journal
	buf     []byte      // a batch's records, reused
}

// Stats are counters since Open.
type Stats struct {
	Events  uint64 // events committed
	Commits uint64 // group commits (journal writes and syncs)
	// InlineCommits are the group commits an Append made on its own
	// goroutine, finding the log idle (inline.go); they count in Commits
	// once acknowledged.
	InlineCommits uint64
	// InlineStarts are the stream starts written and synced on their
	// caller's goroutine, finding the start file idle (startinline.go).
	InlineStarts   uint64
	Applies        uint64 // bbolt transactions applying the journal
	QueueFullWaits uint64 // appends that found the queue full and waited
	// Replayed is the events Open applied from the journal: those
	// journaled but not yet in audit.db when the process stopped.
	Replayed uint64
	// Interrupted is the streams Open recorded as interrupted: started
	// before the process stopped, and never recorded (starts.go).
	Interrupted uint64
	// BodyBytes are the committed events' bodies as received and sent,
	// StoredBodyBytes the same bodies as the journal stores them
	// (compressed), and JournalBytes the journal's frames that hold them
	// with their leaves.
	BodyBytes, StoredBodyBytes, JournalBytes uint64
}

type stats struct {
	events, commits, inline, inlineStarts, applies, queueFull, replayed, interrupted atomic.Uint64
	bodyBytes, storedBodyBytes, journalBytes                                         atomic.Uint64
}

// Stats returns the counters since Open.
func (l *Log) Stats() Stats {
	return Stats{Events: l.stats.events.Load(), Commits: l.stats.commits.Load(), InlineCommits: l.stats.inline.Load(),
		InlineStarts: l.stats.inlineStarts.Load(),
		Applies:      l.stats.applies.Load(), QueueFullWaits: l.stats.queueFull.Load(),
		Replayed: l.stats.replayed.Load(), Interrupted: l.stats.interrupted.Load(), BodyBytes: l.stats.bodyBytes.Load(),
		StoredBodyBytes: l.stats.storedBodyBytes.Load(), JournalBytes: l.stats.journalBytes.Load()}
}

// Healthy reports whether the log accepts appends: false, with the error
// that failed it, once a commit has failed (ErrFailed), which only a
// reopen, in practice a restart of the process, recovers; and false while
// its disk is full (ErrDiskFull), which ends by itself once space is freed.
func (l *Log) Healthy() (bool, string) {
	if err := l.failure(); err != nil {
		return false, err.Error() + "; restart to recover from the journal"
	}
	if err := l.fullErr(); err != nil {
		return false, err.Error() + "; new requests are refused until space is freed (nothing acknowledged is lost)"
	}
	return true, "ok"
}

// lockTimeout bounds the wait for audit.db's file lock, held by another
// process that has the file open.
var lockTimeout = 5 * time.Second

// Open opens (creating if needed) the log in dir and starts its committer.
func Open(dir string, opts Options) (*Log, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	journalDir := filepath.Join(dir, JournalDir)
	if opts.JournalDir != "" {
		journalDir = filepath.Clean(opts.JournalDir)
	}
	for _, d := range []string{dir, journalDir} {
		// Each new directory's name durable: the journal's may be a path
		// of several new levels on a disk of its own.
		if err := durable.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
	}
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, &bolt.Options{
		Timeout:         lockTimeout, // another process holds the file lock
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: 1 << 30, // address space only; avoids remaps that stall readers
	})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("audit log: open %s: %s is locked by another process; is another tollgate using this data directory? (bbolt %w)", dir, FileName, err)
	}
	if err != nil {
		return nil, fmt.Errorf("audit log: open %s: %w", dir, err)
	}
	// Make the new names (the directory, audit.db, the journal's
	// directory) durable.
	parents := []string{filepath.Dir(dir), dir}
	if p := filepath.Dir(journalDir); !slices.Contains(parents, p) {
		parents = append(parents, p)
	}
	for _, d := range parents {
		if err := syncDir(d); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	l := &Log{
		opts:          opts,
		db:            db,
		queue:         make(chan *pending, opts.QueueSize),
		stopped:       make(chan struct{}),
		dir:           dir,
		journalDir:    journalDir,
		syncSlots:     make(chan struct{}, opts.MaxSyncsInFlight),
		acks:          make(chan *inflight, opts.MaxSyncsInFlight),
		acked:         make(chan struct{}),
		failedCh:      make(chan struct{}),
		apply:         newApplier(opts.ApplyInterval),
		appendSeconds: newAppendSeconds(),
		syncSeconds:   newSyncSeconds(),
		w:             writerState{sizes: map[string]uint64{}, journal: journalFile{dir: journalDir, syncs: opts.MaxSyncsInFlight}},
	}
	if err := l.init(); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := l.openJournalDir(); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := l.recover(); err != nil {
		_ = l.journalLock.Close()
		_ = db.Close()
		return nil, err
	}
	go l.applyLoop()
	go l.commitLoop()
	if err := l.recoverStarts(); err != nil {
		_ = l.Close()
		return nil, err
	}
	opts.Logger.Info("audit log open", "dir", dir, "journal", journalDir, "appliance_id", opts.ApplianceID,
		"day", l.w.day, "last_sequence", l.w.lastSeq, "retention", opts.Retention.String())
	return l, nil
}

// init creates the buckets, checks the format and appliance, and loads the
// open day and its last sequence.
func (l *Log) init() error {
	return l.db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("audit log: bucket %s: %w", name, err)
			}
		}
		meta := tx.Bucket(bucketMeta)
		if string(meta.Get(metaFormat)) == formatVersionV2 {
			// Its records and frames are read as they are (record.go,
			// journal.go); new ones may be compressed.
			if err := meta.Put(metaFormat, []byte(formatVersion)); err != nil {
				return fmt.Errorf("audit log: mark the log %s: %w", formatVersion, err)
			}
			l.opts.Logger.Info("audit log: format upgraded; bodies appended from now on are stored compressed",
				"from", formatVersionV2, "to", formatVersion)
		}
		if err := claim(meta, metaFormat, formatVersion); err != nil {
			return fmt.Errorf("%w (written by an earlier development version of Tollgate, which this one does not read: move the audit directory aside; for tollgate dev, start with a new --data directory)", err)
		}
		if err := claim(meta, metaAppliance, l.opts.ApplianceID); err != nil {
			return err
		}
		if err := l.loadNonce(meta); err != nil {
			return err
		}
		if l.opts.Signer != nil {
			h, err := storeCert(tx, l.opts.Signer)
			if err != nil {
				return err
			}
			l.certHash = h
		}
		l.w.day = string(meta.Get(metaCurrentDay))
		if l.w.day != "" {
			l.w.lastSeq, l.w.end = parseDayState(tx.Bucket(bucketSeq).Get([]byte(l.w.day)))
			if today := ids.Day(l.opts.Now()); today < l.w.day {
				l.opts.Logger.Warn("audit log: clock is behind the open day; events keep joining it",
					"open_day", l.w.day, "clock_day", today)
			}
		}
		return nil
	})
}

// loadNonce reads the log's journal nonce, making it on first use (also
// for logs from before frames carried one).
func (l *Log) loadNonce(meta *bolt.Bucket) error {
	nonce := meta.Get(metaJournalNonce)
	if nonce == nil {
		nonce = make([]byte, nonceLen)
		if _, err := rand.Read(nonce); err != nil {
			return fmt.Errorf("audit log: make the journal nonce: %w", err)
		}
		if err := meta.Put(metaJournalNonce, nonce); err != nil {
			return fmt.Errorf("audit log: store the journal nonce: %w", err)
		}
	}
	if len(nonce) != nonceLen {
		return fmt.Errorf("audit log: the journal nonce in %s is %d bytes, not %d", FileName, len(nonce), nonceLen)
	}
	copy(l.nonce[:], nonce)
	return nil
}

// claim stores want under key, or checks that the stored value is want.
func claim(b *bolt.Bucket, key []byte, want string) error {
	got := b.Get(key)
	if got == nil {
		return b.Put(key, []byte(want))
	}
	if string(got) != want {
		return fmt.Errorf("audit log: this log's %s is %q, not %q", key, got, want)
	}
	return nil
}

// Close stops accepting appends, commits those already queued, applies
// the journal to bbolt, and closes the files. Stop Run first.
func (l *Log) Close() error {
	l.closeMu.Lock()
	if l.closed {
		l.closeMu.Unlock()
		return nil
	}
	l.closed = true
	close(l.queue)
	if l.starts != nil {
		close(l.starts.queue)
	}
	l.closeMu.Unlock()
	l.closeStarts()
	<-l.stopped
	l.apply.close()
	l.writeMu.Lock() // a scrub of failed batches may still run
	end := l.w.end
	if l.failure() != nil {
		end = l.durable.Load() // cut the failed batches (see scrubFailed)
	}
	journalErr := l.w.journal.close(end)
	l.writeMu.Unlock()
	// Released before audit.db's lock: a process opening the same
	// audit.db next, waiting on bbolt's lock, then finds this one free.
	_ = l.journalLock.Close()
	if err := l.db.Close(); err != nil {
		return fmt.Errorf("audit log: close: %w", err)
	}
	return journalErr
}
