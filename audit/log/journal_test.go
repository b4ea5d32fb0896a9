package log

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/internal/durable"
)

// journalOf returns the path of a day's journal in e's log.
func (e *env) journalOf(day string) string {
	return filepath.Join(e.journal, day+journalSuffix)
}

// frames encodes events as the committer would write them as one batch,
// numbered from firstSeq, for a journal whose end is base and durable
// through it; leafIndex gives each event's index.
func (e *env) frames(t *testing.T, base, firstSeq uint64, evs []Event, leafIndex []uint64) []byte {
	t.Helper()
	return e.batch(t, base, base, firstSeq, evs, leafIndex)
}

// batch is frames for a batch written when the journal was durable only
// through durableEnd (batches before it still syncing).
func (e *env) batch(t *testing.T, base, durableEnd, firstSeq uint64, evs []Event, leafIndex []uint64) []byte {
	t.Helper()
	return e.encodeBatch(t, base, durableEnd, firstSeq, evs, leafIndex, false)
}

// rawBatch is batch with the bodies stored as they are, whatever their
// size: a body's bytes are then in the journal as sent.
func (e *env) rawBatch(t *testing.T, base, durableEnd, firstSeq uint64, evs []Event, leafIndex []uint64) []byte {
	t.Helper()
	return e.encodeBatch(t, base, durableEnd, firstSeq, evs, leafIndex, true)
}

func (e *env) encodeBatch(t *testing.T, base, durableEnd, firstSeq uint64, evs []Event, leafIndex []uint64, raw bool) []byte {
	t.Helper()
	mark := frameMark{nonce: e.log.nonce, durable: durableEnd}
	var buf []byte
	for i, ev := range evs {
		p, err := e.log.prepare(ev)
		if err != nil {
			t.Fatal(err)
		}
		if raw {
			p.codec, p.stored = codecNone, append(slices.Clip(ev.RequestBody), ev.ResponseBody...)
		}
		seq := firstSeq + uint64(i)
		en := entry{tenant: p.tenant, requestID: p.requestID, seq: seq, leafIndex: leafIndex[i],
			leaf: p.tpl.Bytes(seq), reqLen: uint64(p.reqLen), respLen: uint64(p.respLen), codec: p.codec}
		buf = appendRecord(buf, base+uint64(len(buf)), mark, &en, p.stored)
	}
	return buf
}

// closedJournal closes e's log and returns the path of its first day's
// journal and that journal's end: a test then writes past it what a crash
// could have left.
func (e *env) closedJournal(t *testing.T) (string, uint64) {
	t.Helper()
	if err := e.log.Close(); err != nil {
		t.Fatal(err)
	}
	path := e.journalOf("2026-03-01")
	return path, fileSize(t, path)
}

func appendFile(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
}

func fileSize(t *testing.T, path string) uint64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(info.Size())
}

// TestReplayJournalTail: events journaled (acknowledged) but not yet in
// audit.db when the process died are applied on open, and a torn last frame
// (a write the crash cut short, never acknowledged) is cut off and kept
// beside the journal; with the journal in a directory of its own too.
func TestReplayJournalTail(t *testing.T) {
	for _, layout := range journalLayouts {
		t.Run(layout.name, func(t *testing.T) { testReplayJournalTail(t, layout.own) })
	}
}

func testReplayJournalTail(t *testing.T, own bool) {
	e := newEnv(t, withJournal(t, Options{}, own))
	for i, tenant := range []string{"acme", "globex", "acme"} {
		e.mustAppend(t, event(i, tenant))
	}
	path, end := e.closedJournal(t)
	tail := e.frames(t, end, 4, []Event{event(3, "acme"), event(4, "globex")}, []uint64{2, 1})
	torn := e.frames(t, end+uint64(len(tail)), 6, []Event{event(5, "acme")}, []uint64{3})
	torn = torn[:len(torn)-7]
	appendFile(t, path, append(append([]byte{}, tail...), torn...))

	e.log = nil
	e.reopen(t, Options{})
	if got := e.log.Stats().Replayed; got != 2 {
		t.Fatalf("replayed %d events, want 2", got)
	}
	for _, tc := range []struct {
		id       string
		seq, idx uint64
	}{{"req_acme3", 4, 2}, {"req_globex4", 5, 1}} {
		rec, err := e.log.Event(tc.id)
		if err != nil {
			t.Fatalf("replayed %s: %v", tc.id, err)
		}
		if rec.Leaf.Sequence != tc.seq || rec.LeafIndex != tc.idx || rec.BodiesLost || len(rec.RequestBody) == 0 {
			t.Fatalf("replayed %s: %+v", tc.id, rec)
		}
	}
	if _, err := e.log.Event("req_acme5"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the torn event: %v, want ErrNotFound", err)
	}
	if got := fileSize(t, path); got != end+uint64(len(tail)) {
		t.Fatalf("journal is %d bytes after recovery, want %d", got, end+uint64(len(tail)))
	}
	kept, err := os.ReadFile(path + ".torn-" + strconv.FormatUint(end+uint64(len(tail)), 10))
	if err != nil || !bytes.Equal(kept, torn) {
		t.Fatalf("torn tail kept as %d bytes (%v), want the %d cut", len(kept), err, len(torn))
	}

	r := e.mustAppend(t, event(6, "acme"))
	if r.Sequence != 6 || r.LeafIndex != 3 {
		t.Fatalf("first append after replay: %+v, want sequence 6, leaf 3", r)
	}
	e.mustSign(t)
	p, err := e.log.InclusionProof("acme", "2026-03-01", "req_acme3", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := head.VerifyInclusion(p.Head, p.Leaf, p.LeafIndex, p.Hashes); err != nil || p.Head.EventCount != 4 {
		t.Fatalf("proof of a replayed event: %v, head %+v", err, p.Head)
	}
}

// TestReplaySyncsJournalFirst: the frames a crash left past the applied
// end may be only in the page cache (a batch whose sync never returned),
// so recovery syncs the journal before audit.db records them: otherwise a
// power loss could leave audit.db ahead of its journal. A sync that fails
// stops Open with audit.db as it was.
func TestReplaySyncsJournalFirst(t *testing.T) {
	e := newEnv(t, Options{})
	e.mustAppend(t, event(0, "acme"))
	path, end := e.closedJournal(t)
	appendFile(t, path, e.frames(t, end, 2, []Event{event(1, "acme")}, []uint64{1}))

	errSync := errors.New("injected sync failure")
	var synced []string
	replaySync = func(f *os.File) error {
		synced = append(synced, f.Name())
		return errSync
	}
	t.Cleanup(func() { replaySync = durable.DataSync })
	l, err := Open(e.dir, Options{Signer: e.pki.app, Now: e.clock.Now})
	if err == nil {
		_ = l.Close()
	}
	if !errors.Is(err, errSync) || !slices.Equal(synced, []string{path}) {
		t.Fatalf("Open with a failing journal sync = %v after syncing %v, want the sync's error after syncing %s", err, synced, path)
	}
	db, err := bolt.Open(filepath.Join(e.dir, FileName), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *bolt.Tx) error {
		lastSeq, applied := parseDayState(tx.Bucket(bucketSeq).Get([]byte("2026-03-01")))
		if lastSeq != 1 || applied != end || tx.Bucket(bucketRequests).Get([]byte("req_acme1")) != nil {
			t.Errorf("audit.db applied sequence %d, %d bytes, before the journal was synced; want 1, %d", lastSeq, applied, end)
		}
		return nil
	})
	if closeErr := db.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		t.Fatal(err)
	}

	replaySync = durable.DataSync
	e.log = nil
	e.reopen(t, Options{})
	if got := e.log.Stats().Replayed; got != 1 {
		t.Fatalf("replayed %d events once the sync works, want 1", got)
	}
	if rec, err := e.log.Event("req_acme1"); err != nil || rec.Leaf.Sequence != 2 || rec.BodiesLost {
		t.Fatalf("replayed event: %+v, %v", rec, err)
	}
}

// TestOpenRefusesDamagedJournal: a journal that lost applied bytes, or
// whose sequences do not follow on, stops Open rather than being trusted.
func TestOpenRefusesDamagedJournal(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, e *env, path string)
		want   string
	}{
		{"shorter than applied", func(t *testing.T, e *env, path string) {
			if err := os.Truncate(path, int64(fileSize(t, path)-1)); err != nil {
				t.Fatal(err)
			}
		}, "lost acknowledged events"},
		{"journal missing", func(t *testing.T, e *env, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, "has no journal of 2026-03-01"},
		{"sequence gap", func(t *testing.T, e *env, path string) {
			appendFile(t, path, e.frames(t, fileSize(t, path), 5, []Event{event(7, "acme")}, []uint64{2}))
		}, "sequence 5 after 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Options{})
			e.mustAppend(t, event(0, "acme"))
			e.mustAppend(t, event(1, "acme"))
			if err := e.log.Close(); err != nil {
				t.Fatal(err)
			}
			tt.damage(t, e, e.journalOf("2026-03-01"))
			l, err := Open(e.dir, Options{Signer: e.pki.app, Now: e.clock.Now})
			if err == nil {
				_ = l.Close()
				t.Fatal("Open accepted a damaged journal")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestDuplicateWhileUnapplied: a request id journaled but not yet applied
// to audit.db is refused as a duplicate.
func TestDuplicateWhileUnapplied(t *testing.T) {
	e := newEnv(t, Options{ApplyInterval: time.Hour})
	e.mustAppend(t, event(0, "acme"))
	if err := e.log.apply.caughtUp(); err != nil { // the one apply of the hour
		t.Fatal(err)
	}
	e.mustAppend(t, event(1, "acme"))
	if _, err := e.log.Append(context.Background(), event(1, "acme")); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("second append of an unapplied id = %v, want ErrDuplicate", err)
	}
	if s := e.log.Stats(); s.Applies != 1 {
		t.Fatalf("%d applies: the duplicate was not caught before applying", s.Applies)
	}
	if _, err := e.log.Event("req_acme1"); err != nil { // waits for the applier
		t.Fatal(err)
	}
	if _, err := e.log.Append(context.Background(), event(1, "acme")); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("append of an applied id = %v, want ErrDuplicate", err)
	}
}

// TestDuplicateWhileSyncing: with several syncs in flight the committer
// journals a batch while earlier ones still sync, before the applier has
// them; a request id journaled in one of those is refused all the same.
func TestDuplicateWhileSyncing(t *testing.T) {
	e := newEnv(t, Options{MaxSyncsInFlight: 2, MaxBatch: 1, ApplyInterval: time.Hour})
	const trials = 50
	for i := range trials {
		ev := event(i, "acme")
		errs := make(chan error, 2)
		for range 2 {
			go func() {
				_, err := e.log.Append(context.Background(), ev)
				errs <- err
			}()
		}
		var got []error
		accepted, refused := 0, 0
		for range 2 {
			err := <-errs
			got = append(got, err)
			switch {
			case err == nil:
				accepted++
			case errors.Is(err, ErrDuplicate):
				refused++
			}
		}
		if accepted != 1 || refused != 1 {
			t.Fatalf("trial %d: two appends of %s = %v; want one accepted, one ErrDuplicate", i, ev.RequestID, got)
		}
	}
	if err := e.log.apply.caughtUp(); err != nil {
		t.Fatal(err)
	}
	err := e.log.db.View(func(tx *bolt.Tx) error {
		events, requests := tx.Bucket(bucketEvents).Stats().KeyN, tx.Bucket(bucketRequests).Stats().KeyN
		if events != trials || requests != trials {
			t.Errorf("%d events, %d request ids after %d trials; want %d of each", events, requests, trials, trials)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReplayPastZeroFill: a journal killed while zero-filled ahead of its
// frames replays its frames and loses the zeros; bytes after a zero
// header (a later batch whose earlier one never reached the disk) are not
// replayed but kept beside it.
func TestReplayPastZeroFill(t *testing.T) {
	tests := []struct {
		name     string
		gap      bool
		replayed uint64
	}{
		{"frames then zeros", false, 2},
		{"frames, zeros, a frame", true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Options{})
			e.mustAppend(t, event(0, "acme"))
			path, end := e.closedJournal(t)
			first := e.frames(t, end, 2, []Event{event(1, "acme")}, []uint64{1})
			second := e.frames(t, end+uint64(len(first)), 3, []Event{event(2, "acme")}, []uint64{2})
			content := append([]byte{}, first...)
			zeros := make([]byte, 64<<10)
			if tt.gap { // the second batch's place left zero, the third written
				// written while the second batch synced: durable only through the first
				third := e.batch(t, end+uint64(len(first)+len(second)), end+uint64(len(first)), 4, []Event{event(3, "acme")}, []uint64{3})
				content = append(append(content, make([]byte, len(second))...), third...)
			} else {
				content = append(content, second...)
			}
			appendFile(t, path, append(content, zeros...))

			e.log = nil
			e.reopen(t, Options{})
			if got := e.log.Stats().Replayed; got != tt.replayed {
				t.Fatalf("replayed %d, want %d", got, tt.replayed)
			}
			wantEnd := end + uint64(len(first))
			if !tt.gap {
				wantEnd += uint64(len(second))
			}
			if got := fileSize(t, path); got != wantEnd {
				t.Fatalf("journal is %d bytes, want %d", got, wantEnd)
			}
			torn, _ := filepath.Glob(path + ".torn-*")
			if tt.gap != (len(torn) == 1) {
				t.Fatalf("kept tails %v", torn)
			}
			if _, err := e.log.Event("req_acme3"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("event after the gap: %v, want ErrNotFound", err)
			}
			if r := e.mustAppend(t, event(9, "acme")); r.Sequence != 2+tt.replayed {
				t.Fatalf("next sequence %d, want %d", r.Sequence, 2+tt.replayed)
			}
		})
	}
}

// headerOnly is a journal holding one frame header and nothing after it;
// it records the longest read asked of it.
type headerOnly struct {
	hdr     []byte
	longest int
}

func (r *headerOnly) ReadAt(p []byte, off int64) (int, error) {
	r.longest = max(r.longest, len(p))
	if off >= int64(len(r.hdr)) {
		return 0, io.EOF
	}
	n := copy(p, r.hdr[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// TestReadRecordCapsFrameSize: a damaged header cannot make a read take
// more than maxRecord bytes (the payload length is a u32: up to 4 GiB);
// the committer never writes a larger frame, so it is torn.
func TestReadRecordCapsFrameSize(t *testing.T) {
	for _, size := range []uint32{recordFixedLenV1 - 1, maxRecord + 1, math.MaxUint32} {
		t.Run(strconv.FormatUint(uint64(size), 10), func(t *testing.T) {
			r := &headerOnly{hdr: binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, size), 1)}
			_, _, _, err := readRecord(r, 0, nil)
			if !errors.Is(err, errTorn) {
				t.Fatalf("readRecord = %v, want errTorn", err)
			}
			if r.longest > maxRecord {
				t.Fatalf("readRecord read %d bytes for one frame, more than maxRecord", r.longest)
			}
		})
	}
}

// TestReadRecordChecksTheFileFirst: a damaged header that claims a legal
// size the file does not hold is torn, found without reading (or
// allocating) that size: up to maxRecord, 1 GiB, per damaged frame.
func TestReadRecordChecksTheFileFirst(t *testing.T) {
	r := &headerOnly{hdr: binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, maxRecord), 1)}
	if _, _, _, err := readRecord(r, 0, nil); !errors.Is(err, errTorn) {
		t.Fatalf("readRecord = %v, want errTorn", err)
	}
	if r.longest > frameHeaderLen {
		t.Fatalf("readRecord read %d bytes at once for a frame the file does not hold", r.longest)
	}
}

// TestReadRecordBodyLengthsOverflow: a frame whose checksum holds but
// whose two body lengths add up to its bodies' size only by overflowing
// is refused, rather than stored for a read to slice past its buffer.
func TestReadRecordBodyLengthsOverflow(t *testing.T) {
	bodies := []byte(`{"n":1}{"ok":true}`)
	n := uint64(len(bodies))
	tests := []struct {
		name            string
		reqLen, respLen uint64
		ok              bool
	}{
		{"lengths that hold", 7, n - 7, true},
		{"request length past the bodies", n + 1, math.MaxUint64, false},
		{"response length past the bodies", math.MaxUint64, n + 1, false},
		{"both lengths huge", math.MaxUint64 / 2, math.MaxUint64/2 + n + 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := entry{tenant: "acme", requestID: []byte("req_x1"), seq: 1, leaf: []byte("{}"),
				reqLen: tt.reqLen, respLen: tt.respLen}
			frame := appendRecord(nil, 0, frameMark{}, &e, bodies)
			got, next, _, err := readRecord(bytes.NewReader(frame), 0, nil)
			if tt.ok {
				if err != nil || next != uint64(len(frame)) || got.reqLen != tt.reqLen || got.respLen != tt.respLen {
					t.Fatalf("readRecord = %+v, %d, %v", got, next, err)
				}
				return
			}
			if err == nil || errors.Is(err, errTorn) {
				t.Fatalf("readRecord of lengths %d and %d for %d bytes = %v, want a frame it cannot read", tt.reqLen, tt.respLen, n, err)
			}
		})
	}
}

// TestJournalZeroFilledAhead: the open journal is filled ahead of its
// frames, and closing it cuts the fill.
func TestJournalZeroFilledAhead(t *testing.T) {
	e := newEnv(t, Options{})
	e.mustAppend(t, event(0, "acme"))
	path := e.journalOf("2026-03-01")
	e.log.writeMu.Lock()
	if f := e.log.w.journal.fill; f != nil {
		e.log.w.journal.endFill(<-f)
	}
	end := e.log.w.end
	e.log.writeMu.Unlock()
	if got := fileSize(t, path); got < end+journalChunk {
		t.Fatalf("journal of %d bytes for %d of frames: not filled ahead", got, end)
	}
	if err := e.log.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, path); got != end {
		t.Fatalf("closed journal is %d bytes, want %d", got, end)
	}
}

// TestJournalFillsAheadWhenIdle: a write starts a fill only when less than
// journalLow is filled past it; the committer, once idle, tops the fill up
// to journalAhead, so that busy moments rarely meet one. A few appends,
// each followed by an idle moment, must see it.
func TestJournalFillsAheadWhenIdle(t *testing.T) {
	e := newEnv(t, Options{})
	for i := range 20 {
		e.mustAppend(t, event(i, "acme"))
		e.log.writeMu.Lock()
		j := &e.log.w.journal
		if j.fill != nil {
			j.endFill(<-j.fill)
		}
		filled, end := j.filled, e.log.w.end
		e.log.writeMu.Unlock()
		if filled >= end+journalAhead {
			if got := fileSize(t, e.journalOf("2026-03-01")); got != filled {
				t.Fatalf("journal of %d bytes, %d filled", got, filled)
			}
			return
		}
	}
	t.Fatalf("never more than journalLow..journalAhead filled ahead after %d idle moments", 20)
}

// TestJournalSyncDescriptors: each sync slot syncs through a file
// description of its own, kept for the day and taken in turn, so that a
// writeback error is reported to every sync that covers it.
func TestJournalSyncDescriptors(t *testing.T) {
	e := newEnv(t, Options{MaxSyncsInFlight: 3})
	e.mustAppend(t, event(0, "acme"))
	e.log.writeMu.Lock()
	j := &e.log.w.journal
	files := slices.Clone(j.syncFiles)
	used := map[*os.File]int{}
	for range 6 {
		used[j.syncFiles[j.nextSync%uint64(len(j.syncFiles))]]++
		if err := j.syncer()(); err != nil {
			t.Error(err)
		}
	}
	e.log.writeMu.Unlock()
	if len(files) != 3 || files[0] != j.f {
		t.Fatalf("%d sync descriptions, the first the journal's own: %v", len(files), files[0] == j.f)
	}
	fds := map[uintptr]bool{}
	for _, f := range files {
		fds[f.Fd()] = true
		if used[f] != 2 {
			t.Errorf("description %d used %d times in 6 syncs, want 2", f.Fd(), used[f])
		}
	}
	if len(fds) != 3 {
		t.Fatalf("%d distinct descriptors, want 3", len(fds))
	}
	if err := e.log.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range files[1:] {
		if _, err := f.Stat(); err == nil {
			t.Errorf("sync description %s still open after Close", f.Name())
		}
	}
}
