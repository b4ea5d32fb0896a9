package log

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// journalFrame is one frame read back from a journal file.
type journalFrame struct {
	off uint64
	e   entry
}

// readFrames reads a journal file's frames up to its zero-filled space.
func readFrames(t *testing.T, path string) []journalFrame {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var frames []journalFrame
	var buf []byte
	for off := uint64(0); ; {
		var e entry
		var next uint64
		e, next, buf, err = readRecord(f, off, buf)
		if err != nil {
			return frames
		}
		frames = append(frames, journalFrame{off, e})
		off = next
	}
}

// TestFrameMarks: the committer marks each frame with the log's nonce and
// the end of the day's journal acknowledged when its batch was written.
// Appends one after another are batches of one, each written once the one
// before was acknowledged, so each frame records its own start; a reopen
// and a new day start from what is durable.
func TestFrameMarks(t *testing.T) {
	e := newEnv(t, Options{})
	for i := range 3 {
		e.mustAppend(t, event(i, "acme"))
	}
	e.reopen(t, Options{})
	e.mustAppend(t, event(3, "globex"))
	e.clock.Advance(24 * time.Hour)
	e.mustAppend(t, event(4, "acme"))
	e.mustAppend(t, event(5, "acme"))
	nonce := e.log.nonce
	if nonce == ([nonceLen]byte{}) {
		t.Fatal("the log has no journal nonce")
	}
	if err := e.log.Close(); err != nil {
		t.Fatal(err)
	}
	for _, day := range []string{"2026-03-01", "2026-03-02"} {
		frames := readFrames(t, e.journalOf(day))
		if want := map[string]int{"2026-03-01": 4, "2026-03-02": 2}[day]; len(frames) != want {
			t.Fatalf("%s: %d frames, want %d", day, len(frames), want)
		}
		for i, f := range frames {
			if f.e.mark.nonce != nonce {
				t.Errorf("%s frame %d: nonce %x, want the log's %x", day, i, f.e.mark.nonce, nonce)
			}
			if f.e.mark.durable != f.off {
				t.Errorf("%s frame %d at %d: durable through %d, want its own start", day, i, f.off, f.e.mark.durable)
			}
		}
	}
}

// TestFrameMarksOverlappingSyncs: with several batches syncing at once, a
// frame's durable end is the end of an acknowledged batch (a frame
// boundary), never past its own start, and never moves back.
func TestFrameMarksOverlappingSyncs(t *testing.T) {
	e := newEnv(t, Options{MaxSyncsInFlight: 4})
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := range 25 {
				if _, err := e.log.Append(context.Background(), event(w*100+i, "acme")); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if err := e.log.Close(); err != nil {
		t.Fatal(err)
	}
	frames := readFrames(t, e.journalOf("2026-03-01"))
	if len(frames) != 400 {
		t.Fatalf("%d frames, want 400", len(frames))
	}
	starts := map[uint64]bool{0: true}
	var last uint64
	for i, f := range frames {
		starts[f.off] = true
		d := f.e.mark.durable
		if d > f.off || d < last || !starts[d] {
			t.Fatalf("frame %d at %d: durable through %d (previous frame's %d): not an acknowledged boundary before it", i, f.off, d, last)
		}
		last = d
	}
}

// TestRecoveryTellsDamageFromATornWrite: bytes past the applied end that
// cannot be read are cut as a torn write unless a later frame of this log
// proves they had been acknowledged; then Open refuses, leaving the file
// as it was, rather than lose acknowledged events and reuse their
// sequence numbers.
func TestRecoveryTellsDamageFromATornWrite(t *testing.T) {
	type layout struct {
		end          uint64 // journal end before the batches (applied)
		first, later []byte // two batches: sequences 3 and 4, then 5
	}
	damageFirst := func(b []byte) { b[frameHeaderLen+40] ^= 0x01 } // a payload byte: checksum fails
	tests := []struct {
		name string
		// build returns the two batches: the first starting at end, the
		// later one after it.
		build  func(t *testing.T, e *env, end uint64) (first, later []byte)
		damage func(l *layout)
		// refused: Open fails with ErrJournalDamaged; else it cuts at
		// the first batch (replaying nothing) or, when cutLater, at the
		// later one.
		refused, cutLater bool
	}{
		{
			name: "acknowledged frame fails its checksum",
			build: func(t *testing.T, e *env, end uint64) ([]byte, []byte) {
				first := e.frames(t, end, 3, []Event{event(2, "acme"), event(3, "acme")}, []uint64{2, 3})
				return first, e.frames(t, end+uint64(len(first)), 5, []Event{event(4, "acme")}, []uint64{4})
			},
			damage:  func(l *layout) { damageFirst(l.first) },
			refused: true,
		},
		{
			name: "acknowledged frame's page reads back as zeros",
			build: func(t *testing.T, e *env, end uint64) ([]byte, []byte) {
				first := e.frames(t, end, 3, []Event{event(2, "acme"), event(3, "acme")}, []uint64{2, 3})
				return first, e.frames(t, end+uint64(len(first)), 5, []Event{event(4, "acme")}, []uint64{4})
			},
			damage:  func(l *layout) { clear(l.first[:frameHeaderLen+64]) },
			refused: true,
		},
		{
			name: "the proving frame ends in zeros (empty bodies)",
			build: func(t *testing.T, e *env, end uint64) ([]byte, []byte) {
				first := e.frames(t, end, 3, []Event{event(2, "acme"), event(3, "acme")}, []uint64{2, 3})
				ev := event(4, "acme")
				ev.RequestBody, ev.ResponseBody = nil, nil
				return first, e.frames(t, end+uint64(len(first)), 5, []Event{ev}, []uint64{4})
			},
			damage:  func(l *layout) { damageFirst(l.first) },
			refused: true,
		},
		{
			name: "the proving frame's body ends in a zero byte",
			build: func(t *testing.T, e *env, end uint64) ([]byte, []byte) {
				first := e.frames(t, end, 3, []Event{event(2, "acme"), event(3, "acme")}, []uint64{2, 3})
				ev := event(4, "acme")
				ev.ResponseBody = []byte("\x1f\x8b\x00\x00")
				return first, e.frames(t, end+uint64(len(first)), 5, []Event{ev}, []uint64{4})
			},
			damage:  func(l *layout) { damageFirst(l.first) },
			refused: true,
		},
		{
			name: "a frame that does not follow on proves nothing",
			build: func(t *testing.T, e *env, end uint64) ([]byte, []byte) {
				first := e.frames(t, end, 3, []Event{event(2, "acme"), event(3, "acme")}, []uint64{2, 3})
				// A copy of a frame numbered as the unreadable one (an
				// earlier journal passing through as data, say).
				return first, e.frames(t, end+uint64(len(first)), 3, []Event{event(5, "acme")}, []uint64{2})
			},
			damage: func(l *layout) { damageFirst(l.first) },
		},
		{
			name: "later batch written while the first synced",
			build: func(t *testing.T, e *env, end uint64) ([]byte, []byte) {
				first := e.frames(t, end, 3, []Event{event(2, "acme"), event(3, "acme")}, []uint64{2, 3})
				return first, e.batch(t, end+uint64(len(first)), end, 5, []Event{event(4, "acme")}, []uint64{4})
			},
			damage: func(l *layout) { damageFirst(l.first) },
		},
		{
			name: "the last batch torn",
			build: func(t *testing.T, e *env, end uint64) ([]byte, []byte) {
				first := e.frames(t, end, 3, []Event{event(2, "acme"), event(3, "acme")}, []uint64{2, 3})
				return first, e.frames(t, end+uint64(len(first)), 5, []Event{event(4, "acme")}, []uint64{4})
			},
			damage:   func(l *layout) { l.later[len(l.later)-3] ^= 0xff },
			cutLater: true,
		},
		{
			name: "acknowledged frame's compressed bodies damaged",
			build: func(t *testing.T, e *env, end uint64) ([]byte, []byte) {
				first := e.frames(t, end, 3, []Event{streamFor(2, "acme", 100), streamFor(3, "acme", 100)}, []uint64{2, 3})
				mustCodec(t, first, codecS2)
				return first, e.frames(t, end+uint64(len(first)), 5, []Event{event(4, "acme")}, []uint64{4})
			},
			// A byte of the second frame's compressed bodies, which
			// end the batch.
			damage:  func(l *layout) { l.first[len(l.first)-50] ^= 0x01 },
			refused: true,
		},
		{
			name: "the last batch torn in its compressed bodies",
			build: func(t *testing.T, e *env, end uint64) ([]byte, []byte) {
				first := e.frames(t, end, 3, []Event{event(2, "acme"), event(3, "acme")}, []uint64{2, 3})
				later := e.frames(t, end+uint64(len(first)), 5, []Event{streamFor(4, "acme", 100)}, []uint64{4})
				mustCodec(t, later, codecS2)
				return first, later
			},
			damage:   func(l *layout) { l.later = l.later[:len(l.later)-50] },
			cutLater: true,
		},
		{
			name: "a frame of another nonce in a body proves nothing",
			build: func(t *testing.T, e *env, end uint64) ([]byte, []byte) {
				first := e.frames(t, end, 3, []Event{event(2, "acme"), event(3, "acme")}, []uint64{2, 3})
				// A request body holding a frame that claims the journal
				// durable through its own start, but with a guessed nonce.
				forged := entry{tenant: "acme", requestID: []byte("req_forged"), seq: 9, leaf: []byte("{}")}
				fake := appendRecord(nil, 0, frameMark{nonce: [nonceLen]byte{1, 2, 3}, durable: end + uint64(len(first)) + 1},
					&forged, nil)
				ev := event(4, "acme")
				ev.RequestBody = append(append([]byte(`{"pad":"`), fake...), `"}`...)
				later := e.rawBatch(t, end+uint64(len(first)), end, 5, []Event{ev}, []uint64{4})
				if !bytes.Contains(later, fake) {
					t.Fatal("the forged frame is not in the journal as sent")
				}
				return first, later
			},
			damage: func(l *layout) { damageFirst(l.first) },
		},
		{
			name: "a frame claiming more than was written before it is not trusted",
			build: func(t *testing.T, e *env, end uint64) ([]byte, []byte) {
				first := e.frames(t, end, 3, []Event{event(2, "acme"), event(3, "acme")}, []uint64{2, 3})
				later := e.batch(t, end+uint64(len(first)), end+uint64(len(first))+1, 5, []Event{event(4, "acme")}, []uint64{4})
				return first, later
			},
			damage: func(l *layout) { damageFirst(l.first) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Options{})
			e.mustAppend(t, event(0, "acme"))
			e.mustAppend(t, event(1, "acme"))
			path, end := e.closedJournal(t)
			l := layout{end: end}
			l.first, l.later = tt.build(t, e, l.end)
			tt.damage(&l)
			appendFile(t, path, append(append(append([]byte{}, l.first...), l.later...), make([]byte, 4096)...))
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}

			e.log = nil
			got, err := Open(e.dir, Options{Signer: e.pki.app, Now: e.clock.Now})
			if tt.refused {
				if err == nil {
					_ = got.Close()
					t.Fatal("Open cut acknowledged events as a torn write")
				}
				if !errors.Is(err, ErrJournalDamaged) || !strings.Contains(err.Error(), "truncate it to") {
					t.Fatalf("Open = %v, want ErrJournalDamaged saying what to do", err)
				}
				after, rerr := os.ReadFile(path)
				if rerr != nil || !bytes.Equal(after, before) {
					t.Fatalf("the refused journal changed (%v)", rerr)
				}
				if kept, _ := filepath.Glob(path + ".torn-*"); len(kept) != 0 {
					t.Fatalf("kept %v for a journal it refused", kept)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open = %v, want a torn write cut", err)
			}
			e.log = got
			t.Cleanup(func() { _ = got.Close() })
			wantEnd, wantSeq := l.end, uint64(3)
			if tt.cutLater {
				wantEnd, wantSeq = l.end+uint64(len(l.first)), 5
			}
			if size := fileSize(t, path); size != wantEnd {
				t.Fatalf("journal cut to %d bytes, want %d", size, wantEnd)
			}
			if r := e.mustAppend(t, event(7, "globex")); r.Sequence != wantSeq {
				t.Fatalf("next sequence %d, want %d", r.Sequence, wantSeq)
			}
		})
	}
}

// appendRecordV1 encodes a frame as Tollgate wrote them before frames
// carried a mark.
func appendRecordV1(buf []byte, base uint64, e *entry, bodies []byte) []byte {
	start := len(buf)
	be := binary.BigEndian
	buf = append(buf, 0, 0, 0, 0, 0, 0, 0, 0, 1)
	buf = be.AppendUint64(buf, e.seq)
	buf = be.AppendUint64(buf, e.leafIndex)
	buf = be.AppendUint16(buf, uint16(len(e.tenant)))
	buf = append(buf, e.tenant...)
	buf = be.AppendUint16(buf, uint16(len(e.requestID)))
	buf = append(buf, e.requestID...)
	buf = be.AppendUint32(buf, uint32(len(e.leaf)))
	buf = append(buf, e.leaf...)
	buf = be.AppendUint64(buf, e.reqLen)
	buf = be.AppendUint64(buf, e.respLen)
	e.bodyOff = base + uint64(len(buf)-start)
	buf = append(buf, bodies...)
	payload := buf[start+frameHeaderLen:]
	be.PutUint32(buf[start:], uint32(len(payload)))
	be.PutUint32(buf[start+4:], crc32.Checksum(payload, castagnoli))
	return buf
}

// TestReplayVersion1Frames: a journal written before frames carried a mark
// still replays, bodies included, and new frames follow it.
func TestReplayVersion1Frames(t *testing.T) {
	e := newEnv(t, Options{})
	e.mustAppend(t, event(0, "acme"))
	path, end := e.closedJournal(t)
	var buf []byte
	for i, ev := range []Event{event(1, "acme"), event(2, "globex")} {
		p, err := e.log.prepare(ev)
		if err != nil {
			t.Fatal(err)
		}
		seq := uint64(2 + i)
		en := entry{tenant: p.tenant, requestID: p.requestID, seq: seq, leafIndex: []uint64{1, 0}[i],
			leaf: p.tpl.Bytes(seq), reqLen: uint64(p.reqLen), respLen: uint64(p.respLen)}
		buf = appendRecordV1(buf, end+uint64(len(buf)), &en, append(slices.Clip(ev.RequestBody), ev.ResponseBody...))
	}
	appendFile(t, path, buf)

	e.log = nil
	e.reopen(t, Options{})
	if got := e.log.Stats().Replayed; got != 2 {
		t.Fatalf("replayed %d version 1 frames, want 2", got)
	}
	for _, id := range []string{"req_acme1", "req_globex2"} {
		rec, err := e.log.Event(id)
		if err != nil || rec.BodiesLost || !bytes.Contains(rec.RequestBody, []byte(`"n"`)) {
			t.Fatalf("replayed %s: %+v, %v", id, rec, err)
		}
	}
	if r := e.mustAppend(t, event(3, "acme")); r.Sequence != 4 {
		t.Fatalf("next sequence %d, want 4", r.Sequence)
	}
}

// TestReplayRefusesAnotherLogsFrames: a frame carrying another log's nonce
// is not this log's to replay.
func TestReplayRefusesAnotherLogsFrames(t *testing.T) {
	e := newEnv(t, Options{})
	e.mustAppend(t, event(0, "acme"))
	path, end := e.closedJournal(t)
	e.log.nonce[0] ^= 0xff // frames as another log would write them
	appendFile(t, path, e.frames(t, end, 2, []Event{event(1, "acme")}, []uint64{1}))
	_, err := Open(e.dir, Options{Signer: e.pki.app, Now: e.clock.Now})
	if err == nil || !strings.Contains(err.Error(), "another log") {
		t.Fatalf("Open = %v, want a frame of another log refused", err)
	}
}

// TestCutTailKept: the bytes cut as a torn write are kept beside the
// journal whole, a frame ending in zeros included, and a second cut at the
// same offset (another crash there) keeps its own copy.
func TestCutTailKept(t *testing.T) {
	e := newEnv(t, Options{})
	e.mustAppend(t, event(0, "acme"))
	path, end := e.closedJournal(t)
	first := e.frames(t, end, 2, []Event{event(1, "acme")}, []uint64{1})
	first[len(first)-1] ^= 0xff // torn: fails its checksum
	ev := event(2, "acme")
	ev.RequestBody, ev.ResponseBody = nil, nil // its frame ends in zeros
	later := e.batch(t, end+uint64(len(first)), end, 3, []Event{ev}, []uint64{2})
	tail := append(append([]byte{}, first...), later...)
	for _, name := range []string{".torn-", ".torn-%d-2"} {
		appendFile(t, path, append(append([]byte{}, tail...), make([]byte, 4096)...))
		e.log = nil
		e.reopen(t, Options{})
		if size := fileSize(t, path); size != end {
			t.Fatalf("journal cut to %d bytes, want %d", size, end)
		}
		keep := path + ".torn-" + strconv.FormatUint(end, 10)
		if name != ".torn-" {
			keep += "-2"
		}
		kept, err := os.ReadFile(keep)
		if err != nil || !bytes.Equal(kept, tail) {
			t.Fatalf("%s: kept %d bytes (%v), want the %d cut, the last frame whole", filepath.Base(keep), len(kept), err, len(tail))
		}
		if err := e.log.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
