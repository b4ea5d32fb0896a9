package log

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/internal/durable"
)

// startReq is one Start on its way through the start committer.
type startReq struct {
	id    string
	frame []byte
	done  chan struct{}
	err   error
}

// starts is the start file and its committer.
type starts struct {
	path  string
	queue chan *startReq
	done  chan struct{}
	f     *os.File
	size  int64 // the file's acknowledged end; the committer's alone
	// sync makes a batch of markers durable (Options.SyncStarts).
	sync func(*os.File) error
	// slot is held by whoever writes to the file: the committer for a
	// batch, or an inline start (tryStartInline).
	slot sync.Mutex
	// lastSync is how long the last sync took (a time.Duration), or -1
	// before the first: an inline start is tried only when it was short.
	lastSync atomic.Int64

	mu sync.Mutex
	// open holds the frames of the markers written whose stream has not
	// recorded its event, and live their bytes.
	open map[string][]byte
	live int64
}

// startLoop is the start committer: it writes whatever starts are queued
// as one write and one fdatasync, until Close closes the queue.
func (l *Log) startLoop() {
	st := l.starts
	defer close(st.done)
	var buf []byte
	var batch []*startReq
	for r := range st.queue {
		// The slot is held from before the batch is drained, so that an
		// inline start (tryStartInline) never writes beside it.
		st.slot.Lock()
		batch = append(batch[:0], r)
		buf = append(buf[:0], r.frame...)
	drain:
		for len(batch) < maxStartBatch && len(buf) < DefaultMaxBatchBytes {
			select {
			case q, ok := <-st.queue:
				if !ok {
					break drain
				}
				batch = append(batch, q)
				buf = append(buf, q.frame...)
			default:
				break drain
			}
		}
		l.commitStarts(batch, buf)
		st.slot.Unlock()
		clear(batch)
	}
	_ = st.f.Close()
}

// commitStarts writes and syncs a batch of markers (buf, their frames)
// and wakes their waiters, then compacts the file if it is due. The
// caller holds the slot.
func (l *Log) commitStarts(batch []*startReq, buf []byte) {
	st := l.starts
	err := l.failure()
	if err == nil {
		if err = st.write(buf, l.opts.Now); err != nil {
			err = l.fail(fmt.Errorf("start file: %w", err))
		}
	}
	if err == nil {
		st.mu.Lock()
		for _, r := range batch {
			st.open[r.id] = r.frame
			st.live += int64(len(r.frame))
		}
		st.mu.Unlock()
	}
	for _, r := range batch {
		r.err = err
		r.frame = nil
		close(r.done)
	}
	if err == nil {
		if err := st.compact(); err != nil {
			_ = l.fail(fmt.Errorf("start file: %w", err))
		}
	}
}

// write appends buf at the file's end and syncs it. A failure cuts the
// file back, so that no marker of a refused start survives to be
// recorded at the next open.
func (st *starts) write(buf []byte, now func() time.Time) error {
	if _, err := st.f.WriteAt(buf, st.size); err != nil {
		_ = st.f.Truncate(st.size)
		return err
	}
	began := now()
	err := st.sync(st.f)
	st.lastSync.Store(int64(now().Sub(began)))
	if err != nil {
		_ = st.f.Truncate(st.size)
		_ = st.f.Sync()
		return err
	}
	st.size += int64(len(buf))
	return nil
}

// finished spends the marker of a request whose event is appended.
func (st *starts) finished(id string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if f, ok := st.open[id]; ok {
		delete(st.open, id)
		st.live -= int64(len(f))
	}
}

// compact rewrites the file with the open markers alone once the spent
// ones are most of it: the new file is written and synced beside it and
// renamed over it.
func (st *starts) compact() error {
	st.mu.Lock()
	if st.size < startsCompactMin || st.size < 2*st.live {
		st.mu.Unlock()
		return nil
	}
	buf := make([]byte, 0, st.live)
	for _, f := range st.open {
		buf = append(buf, f...)
	}
	st.mu.Unlock()
	tmp := st.path + ".new"
	_ = os.Remove(tmp)
	if err := durable.Create(tmp, buf, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, st.path); err != nil {
		return err
	}
	if err := syncDir(filepath.Dir(st.path)); err != nil {
		return err
	}
	f, err := os.OpenFile(st.path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	_ = st.f.Close()
	st.f, st.size = f, int64(len(buf))
	return nil
}

// closeStarts stops the start committer once the queue is closed.
func (l *Log) closeStarts() {
	if l.starts == nil {
		return
	}
	<-l.starts.done
}
