package log

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

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
	for r := range st.queue {
		batch := []*startReq{r}
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
		err := l.failure()
		if err == nil {
			if err = st.write(buf); err != nil {
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
	_ = st.f.Close()
}

// write appends buf at the file's end and syncs it. A failure cuts the
// file back, so that no marker of a refused start survives to be
// recorded at the next open.
func (st *starts) write(buf []byte) error {
	if _, err := st.f.WriteAt(buf, st.size); err != nil {
		_ = st.f.Truncate(st.size)
		return err
	}
	if err := st.sync(st.f); err != nil {
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
