package log

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/audit/leaf"
	"github.com/tollgate-dev/tollgate/internal/durable"
)

// A stream's event is appended at its end, so a crash in the middle of a
// stream would leave no trace of a request whose client already got bytes.
// Before a stream's first byte leaves the gateway, Start makes its
// existence durable: a start marker, group-committed and fdatasynced in
// the start file (StartsFile, in the journal directory). A marker is not
// an event: it takes no sequence and is no leaf. On Open, every marker
// whose request has no event is recorded as an interrupted event
// (StatusInterrupted, recoverStarts), and the file is emptied.
//
// The file is a run of frames, each: payload length (u32), CRC-32C of
// the payload (u32), then
//
//	version (u8, 1) | start length (u32) | start, JSON (startRecord)
//	| request body length as received (u64) | codec (u8) | stored request body
//
// Markers of finished streams are dropped by rewriting the file with the
// open ones once it is more than twice their size and over
// startsCompactMin, so it stays bounded by the streams in flight.

// StartsFile is the name of the start file in the journal directory.
const StartsFile = "streams.started"

// StatusInterrupted is the status of the event recovery records for a
// stream that sent bytes and was cut by a crash of the gateway before its
// event was recorded: its client got 200 and an unknown part of the
// stream. No client ever receives it.
const StatusInterrupted = 599

const (
	startVersion = 1
	// startFixedLen is a start payload's fixed part.
	startFixedLen = 1 + 4 + 8 + 1
	// maxStartBatch bounds the markers of one group commit.
	maxStartBatch = 2048
)

// startsCompactMin is the size below which the start file is never
// rewritten (a variable for tests).
var startsCompactMin int64 = 16 << 20

// StreamStart is what is known of a stream when its first byte is about
// to be sent.
type StreamStart struct {
	RequestID string
	TenantID  string
	KeyID     string
	// Time is when the request was received; zero means now.
	Time             time.Time
	Endpoint         string
	Model            string
	PromptTokens     int64
	PolicyDecisionID string
	// RequestBody is the body as received; the log copies it.
	RequestBody []byte
}

// startRecord is a marker's metadata, as the start file holds it.
type startRecord struct {
	RequestID        string `json:"request_id"`
	TenantID         string `json:"tenant_id"`
	KeyID            string `json:"key_id"`
	Time             string `json:"time"`
	Endpoint         string `json:"endpoint"`
	Model            string `json:"model"`
	PromptTokens     int64  `json:"prompt_tokens"`
	PolicyDecisionID string `json:"policy_decision_id,omitempty"`
}

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

	mu sync.Mutex
	// open holds the frames of the markers written whose stream has not
	// recorded its event, and live their bytes.
	open map[string][]byte
	live int64
}

// Start durably records that the stream of s is about to send its first
// byte, and returns once that is on disk (one fdatasync, shared by the
// starts that arrive together). Once the stream's event is appended the
// marker is spent; if the process dies first, the next Open records an
// interrupted event for it. ctx bounds only the wait.
func (l *Log) Start(ctx context.Context, s StreamStart) error {
	r, err := l.prepareStart(s)
	if err != nil {
		return err
	}
	l.closeMu.RLock()
	if l.closed {
		l.closeMu.RUnlock()
		return ErrClosed
	}
	select {
	case l.starts.queue <- r:
		l.closeMu.RUnlock()
	case <-ctx.Done():
		l.closeMu.RUnlock()
		return fmt.Errorf("audit log: start of %s not recorded: %w", s.RequestID, ctx.Err())
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return fmt.Errorf("audit log: start of %s: %w (it may still be recorded)", s.RequestID, ctx.Err())
	}
}

// prepareStart validates s as the event it may become and encodes its
// frame.
func (l *Log) prepareStart(s StreamStart) (*startReq, error) {
	if s.Time.IsZero() {
		s.Time = l.opts.Now()
	}
	// The event recovery would append must be valid: checked now, while
	// the stream can still be refused. Its bodies are the request body
	// alone, so what it stores is the marker's.
	p, err := l.prepare(s.interrupted())
	if err != nil {
		return nil, err
	}
	rec, err := json.Marshal(startRecord{RequestID: s.RequestID, TenantID: s.TenantID, KeyID: s.KeyID,
		Time: leaf.FormatTime(s.Time), Endpoint: s.Endpoint, Model: s.Model, PromptTokens: s.PromptTokens,
		PolicyDecisionID: s.PolicyDecisionID})
	if err != nil {
		return nil, fmt.Errorf("%w: start of %q: %w", ErrInvalid, s.RequestID, err)
	}
	codec, stored := p.codec, p.stored
	be := binary.BigEndian
	frame := make([]byte, frameHeaderLen, frameHeaderLen+startFixedLen+len(rec)+len(stored))
	frame = append(frame, startVersion)
	frame = be.AppendUint32(frame, uint32(len(rec)))
	frame = append(frame, rec...)
	frame = be.AppendUint64(frame, uint64(len(s.RequestBody)))
	frame = append(frame, codec)
	frame = append(frame, stored...)
	payload := frame[frameHeaderLen:]
	be.PutUint32(frame, uint32(len(payload)))
	be.PutUint32(frame[4:], crc32.Checksum(payload, castagnoli))
	return &startReq{id: s.RequestID, frame: frame, done: make(chan struct{})}, nil
}

// interrupted is the event recovery appends for a stream that started
// and never recorded its event: what was known at its start, the status
// StatusInterrupted, no response body (what was sent is not known) and
// no completion tokens.
func (s StreamStart) interrupted() Event {
	return Event{RequestID: s.RequestID, TenantID: s.TenantID, KeyID: s.KeyID, Time: s.Time,
		Endpoint: s.Endpoint, Model: s.Model, Status: StatusInterrupted, PromptTokens: s.PromptTokens,
		PolicyDecisionID: s.PolicyDecisionID, RequestBody: s.RequestBody}
}

// decodeStart decodes a checked start payload.
func decodeStart(p []byte) (StreamStart, error) {
	be := binary.BigEndian
	if len(p) < startFixedLen || p[0] != startVersion {
		return StreamStart{}, errors.New("not a start marker of version 1")
	}
	n := int(be.Uint32(p[1:]))
	if len(p)-5 < n+9 {
		return StreamStart{}, errors.New("short start record")
	}
	var rec startRecord
	if err := json.Unmarshal(p[5:5+n], &rec); err != nil {
		return StreamStart{}, fmt.Errorf("start record: %w", err)
	}
	at, err := leaf.ParseTime(rec.Time)
	if err != nil {
		return StreamStart{}, fmt.Errorf("start record: %w", err)
	}
	pos := 5 + n
	reqLen := be.Uint64(p[pos:])
	codec := p[pos+8]
	body, err := decodeBodies(codec, p[pos+9:], reqLen)
	if err != nil {
		return StreamStart{}, err
	}
	return StreamStart{RequestID: rec.RequestID, TenantID: rec.TenantID, KeyID: rec.KeyID, Time: at,
		Endpoint: rec.Endpoint, Model: rec.Model, PromptTokens: rec.PromptTokens,
		PolicyDecisionID: rec.PolicyDecisionID, RequestBody: body}, nil
}

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
		f: f, open: map[string][]byte{}}
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
	if err := durable.DataSync(st.f); err != nil {
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
