package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/tollgate-dev/tollgate/internal/durable"
)

// A full disk is a state of the log, not a failure (docs/audit-format.md,
// "A full disk"). A journal write or an audit.db transaction that fails
// with ENOSPC or EDQUOT has stored nothing that was acknowledged: the
// batch's appends fail with ErrDiskFull, its partial write is cut from the
// journal (a cut frees space, it needs none), an applier round is kept to
// be retried, and the log refuses appends at once with ErrDiskFull until a
// probe write in each of its directories succeeds, every
// SpaceProbeInterval or when ProbeSpace is called. A failed sync is still
// a failure (ErrFailed), ENOSPC or not: what the page cache held may be
// gone.

// probeName is the file a probe writes, syncs and removes; the journal's
// files are named by day, so it is never taken for one.
const probeName = ".space-probe"

// probeSize is a probe's write: a batch of the default MaxBatchBytes fits
// in what it proves free, most of the time.
const probeSize = journalChunk

// diskFull is the full state: err is the write's error while full, back is
// closed when the state ends.
type diskFull struct {
	mu      sync.Mutex
	err     error
	back    chan struct{}
	probing bool
}

// isNoSpace reports whether err is a full disk or an exhausted quota.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// fullErr returns ErrDiskFull with its cause while the log is full, else nil.
func (l *Log) fullErr() error {
	l.full.mu.Lock()
	defer l.full.mu.Unlock()
	if l.full.err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrDiskFull, l.full.err)
}

// DiskFull returns ErrDiskFull, with the write's error, while the log's
// disk is full, and nil otherwise: callers refuse work whose event could
// not be recorded before doing it.
func (l *Log) DiskFull() error { return l.fullErr() }

// enterFull puts the log in the full state for cause and starts probing.
func (l *Log) enterFull(cause error) {
	l.full.mu.Lock()
	defer l.full.mu.Unlock()
	if l.full.err != nil {
		return
	}
	l.full.err, l.full.back = cause, make(chan struct{})
	l.opts.Logger.Error("audit log: disk full; refusing appends until space returns",
		"dir", l.dir, "journal", l.journalDir, "err", cause)
	if !l.full.probing {
		l.full.probing = true
		go l.probeLoop()
	}
}

// spaceBack returns a channel closed once the full state ends (closed
// already when the log is not full).
func (l *Log) spaceBack() <-chan struct{} {
	l.full.mu.Lock()
	defer l.full.mu.Unlock()
	if l.full.err == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return l.full.back
}

// probeLoop probes every SpaceProbeInterval until the state ends or the
// log closes.
func (l *Log) probeLoop() {
	t := time.NewTicker(l.opts.SpaceProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-l.stopped:
			l.full.mu.Lock()
			l.full.probing = false
			l.full.mu.Unlock()
			return
		case <-t.C:
		}
		if l.ProbeSpace() {
			l.full.mu.Lock()
			if l.full.err == nil {
				l.full.probing = false
				l.full.mu.Unlock()
				return
			}
			l.full.mu.Unlock()
		}
	}
}

// ProbeSpace ends the full state if a probe write succeeds in the log's
// directory and the journal's, and reports whether the log is now not
// full. It is called every SpaceProbeInterval while full; tests and
// operators' tools may call it to notice freed space at once.
func (l *Log) ProbeSpace() bool {
	if l.fullErr() == nil {
		return true
	}
	for _, dir := range []string{l.dir, l.journalDir} {
		if err := probe(dir); err != nil {
			l.opts.Logger.Debug("audit log: disk still full", "dir", dir, "err", err)
			return false
		}
	}
	l.full.mu.Lock()
	if l.full.err != nil {
		l.full.err = nil
		close(l.full.back)
	}
	l.full.mu.Unlock()
	// A round kept for lack of space is retried; readers wait for it
	// again instead of being told the disk is full.
	l.apply.mu.Lock()
	l.apply.full = nil
	l.apply.mu.Unlock()
	l.apply.poke()
	l.opts.Logger.Info("audit log: disk has space again; taking appends")
	return true
}

// probe writes probeSize bytes to a file in dir, syncs and removes it.
func probe(dir string) error {
	path := filepath.Join(dir, probeName)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(zeros[:probeSize])
	if err == nil {
		err = durable.DataSync(f)
	}
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if rmErr := os.Remove(path); err == nil {
		err = rmErr
	}
	return err
}

// commitNoSpace handles a batch whose journaling failed for lack of
// space: it cuts what the write may have left past the journal's end,
// refuses the batch with ErrDiskFull and enters the full state. It
// reports false when the cut itself failed: the batch's bytes may then
// stay, and the caller fails the log. Caller holds writeMu and a sync slot.
func (l *Log) commitNoSpace(batch []*pending, cause error) bool {
	if err := l.w.journal.cut(l.w.end); err != nil {
		l.opts.Logger.Error("audit log: could not cut a batch that failed for lack of space", "err", err)
		return false
	}
	l.enterFull(cause)
	failAll(batch, fmt.Errorf("%w: %w", ErrDiskFull, cause))
	wake(batch)
	return true
}
