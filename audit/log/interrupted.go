package log

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// readStarts reads the markers of the start file at path, up to the first
// frame it cannot read: a torn write, never acknowledged. A missing file
// holds none.
func readStarts(path string) ([]StreamStart, int64, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("audit log: read %s: %w", path, err)
	}
	var out []StreamStart
	off := 0
	be := binary.BigEndian
	for len(data)-off >= frameHeaderLen {
		size := int(be.Uint32(data[off:]))
		if size == 0 || len(data)-off-frameHeaderLen < size {
			break
		}
		payload := data[off+frameHeaderLen : off+frameHeaderLen+size]
		if crc32.Checksum(payload, castagnoli) != be.Uint32(data[off+4:]) {
			break
		}
		s, err := decodeStart(payload)
		if err != nil {
			return nil, 0, fmt.Errorf("audit log: %s: start marker at %d: %w", path, off, err)
		}
		out = append(out, s)
		off += frameHeaderLen + size
	}
	return out, int64(off), nil
}

// recoverStarts records an interrupted event for every marker of the
// start file whose request has none, then empties the file and starts the
// start committer. It runs in Open, with the committer running, once the
// journal is replayed: a request recorded before the crash is then known,
// and its marker is passed over, so that no request is recorded twice,
// whatever the number of opens. A crash during it leaves the file as it
// was; the next open finds the events already appended and records the
// rest.
func (l *Log) recoverStarts() error {
	path := filepath.Join(l.journalDir, StartsFile)
	markers, valid, err := readStarts(path)
	if err != nil {
		return err
	}
	var recorded int
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	for _, s := range markers {
		if _, err := l.lookupRequest(s.RequestID); err == nil {
			continue // its stream recorded its event
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(s StreamStart) {
			defer func() { <-sem; wg.Done() }()
			_, err := l.Append(context.Background(), s.interrupted())
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				recorded++
			case errors.Is(err, ErrDuplicate): // the same id marked twice
			case firstErr == nil:
				firstErr = fmt.Errorf("audit log: record interrupted stream %s: %w", s.RequestID, err)
			}
		}(s)
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	l.stats.interrupted.Store(uint64(recorded))
	if recorded > 0 {
		l.opts.Logger.Warn("audit log: recorded streams a stop cut before their events (status 599, interrupted)",
			"streams", recorded)
	}
	if fi, err := os.Stat(path); err == nil && fi.Size() > valid {
		l.opts.Logger.Warn("audit log: dropped a torn start marker (a write interrupted by a crash, never acknowledged)",
			"file", path, "offset", valid, "bytes", fi.Size()-valid)
	}
	// Every marker is spent: the file starts empty.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("audit log: start file: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("audit log: sync %s: %w", path, err)
	}
	if err := syncDir(l.journalDir); err != nil {
		_ = f.Close()
		return err
	}
	l.starts = &starts{path: path, queue: make(chan *startReq, l.opts.QueueSize), done: make(chan struct{}),
		f: f, sync: l.opts.SyncStarts, open: map[string][]byte{}}
	l.starts.lastSync.Store(-1)
	go l.startLoop()
	return nil
}

// lookupRequest returns the day and sequence key of a recorded request.
func (l *Log) lookupRequest(id string) ([]byte, error) {
	var key []byte
	err := l.db.View(func(tx *bolt.Tx) error {
		if k := tx.Bucket(bucketRequests).Get([]byte(id)); k != nil {
			key = append([]byte{}, k...)
			return nil
		}
		return fmt.Errorf("%w: event %s", ErrNotFound, id)
	})
	return key, err
}
