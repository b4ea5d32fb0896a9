package log

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/klauspost/compress/s2"
	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/audit/leaf"
)

// streamFor is streamEvent of words words for tenant, numbered n.
func streamFor(n int, tenant string, words int) Event {
	ev := streamEvent(uint64(n), words)
	ev.RequestID = fmt.Sprintf("req_%sstream%d", tenant, n)
	ev.TenantID, ev.KeyID = tenant, "key_"+tenant
	return ev
}

// mustCodec fails unless every frame of a batch stores its bodies as
// codec says.
func mustCodec(t *testing.T, batch []byte, codec byte) {
	t.Helper()
	r := bytes.NewReader(batch)
	for off := uint64(0); off < uint64(len(batch)); {
		e, next, _, err := readRecord(r, off, nil)
		if err != nil {
			t.Fatal(err)
		}
		if e.codec != codec {
			t.Fatalf("frame at %d stores its bodies with codec %d, want %d", off, e.codec, codec)
		}
		off = next
	}
}

// codecOf returns the codec each of the day's journal frames stores its
// bodies with, by request id.
func codecOf(t *testing.T, e *env, day string) map[string]byte {
	t.Helper()
	out := map[string]byte{}
	for _, f := range readFrames(t, e.journalOf(day)) {
		out[string(f.e.requestID)] = f.e.codec
	}
	return out
}

// randomBytes returns n bytes that do not compress.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// TestBodiesRoundTrip: every kind of body reads back byte for byte, with
// the leaf's digests those of the bodies as sent: stored compressed when
// that saves space, as they are otherwise, and the same after a replay of
// the journal.
func TestBodiesRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		ev    Event
		codec byte
	}{
		{"no bodies", Event{}, codecNone},
		{"small bodies", event(1, "acme"), codecNone},
		{"request only", Event{RequestBody: bytes.Repeat([]byte(`{"a":1}`), 100)}, codecS2},
		{"response only", Event{ResponseBody: bytes.Repeat([]byte(`data: {}\n\n`), 100)}, codecS2},
		{"incompressible", Event{RequestBody: randomBytes(1000), ResponseBody: randomBytes(64 << 10)}, codecNone},
		{"a stream", streamEvent(1, 500), codecS2},
		{"a stream of several MiB", streamEvent(2, 40000), codecS2},
		{"binary, half compressible", Event{RequestBody: randomBytes(5000), ResponseBody: make([]byte, 5000)}, codecS2},
	}
	for i := range tests {
		ev := &tests[i].ev
		if ev.TenantID == "" {
			base := event(100+i, "acme")
			base.RequestBody, base.ResponseBody = ev.RequestBody, ev.ResponseBody
			*ev = base
		}
		ev.RequestID = fmt.Sprintf("req_roundtrip%d", i)
		ev.TenantID, ev.KeyID = "acme", "key_acme"
	}
	check := func(t *testing.T, e *env, day string) {
		t.Helper()
		codecs := codecOf(t, e, day)
		for _, tt := range tests {
			rec, err := e.log.Event(tt.ev.RequestID)
			if err != nil {
				t.Fatal(err)
			}
			if rec.BodiesLost || !bytes.Equal(rec.RequestBody, tt.ev.RequestBody) || !bytes.Equal(rec.ResponseBody, tt.ev.ResponseBody) {
				t.Errorf("%s: read back %d and %d bytes (lost %v), want %d and %d", tt.name,
					len(rec.RequestBody), len(rec.ResponseBody), rec.BodiesLost, len(tt.ev.RequestBody), len(tt.ev.ResponseBody))
			}
			if rec.Leaf.RequestSHA256 != leaf.BodyHash(tt.ev.RequestBody) || rec.Leaf.ResponseSHA256 != leaf.BodyHash(tt.ev.ResponseBody) {
				t.Errorf("%s: the leaf's digests are not those of the bodies as sent", tt.name)
			}
			if got := codecs[tt.ev.RequestID]; got != tt.codec {
				t.Errorf("%s: journaled with codec %d, want %d", tt.name, got, tt.codec)
			}
		}
	}
	t.Run("appended", func(t *testing.T) {
		e := newEnv(t, Options{})
		for _, tt := range tests {
			e.mustAppend(t, tt.ev)
		}
		check(t, e, "2026-03-01")
		e.reopen(t, Options{})
		check(t, e, "2026-03-01")
	})
	t.Run("replayed", func(t *testing.T) {
		e := newEnv(t, Options{})
		e.mustAppend(t, event(0, "acme"))
		path, end := e.closedJournal(t)
		evs := make([]Event, len(tests))
		idx := make([]uint64, len(tests))
		for i, tt := range tests {
			evs[i], idx[i] = tt.ev, uint64(i+1)
		}
		appendFile(t, path, e.frames(t, end, 2, evs, idx))
		e.log = nil
		e.reopen(t, Options{})
		if got := e.log.Stats().Replayed; got != uint64(len(tests)) {
			t.Fatalf("replayed %d events, want %d", got, len(tests))
		}
		check(t, e, "2026-03-01")
	})
}

// TestCompressedBodiesDamaged: compressed bodies damaged on disk once
// applied (a bad sector) read as lost, reported, without failing the read
// or the events around them; recovery's own handling of a damaged frame,
// compressed or not, is TestRecoveryTellsDamageFromATornWrite's.
func TestCompressedBodiesDamaged(t *testing.T) {
	damages := []struct {
		name   string
		damage func(b []byte)
	}{
		{"a byte flipped", func(b []byte) { b[len(b)/2] ^= 0x40 }},
		{"zeroed", func(b []byte) { clear(b[len(b)/3:]) }},
		{"the frame header", func(b []byte) { b[0] ^= 0xff }},
	}
	for _, d := range damages {
		t.Run(d.name, func(t *testing.T) {
			e := newEnv(t, Options{})
			evs := []Event{streamFor(1, "acme", 300), streamFor(2, "acme", 300), streamFor(3, "acme", 300)}
			for _, ev := range evs {
				e.mustAppend(t, ev)
			}
			path, _ := e.closedJournal(t)
			var victim journalFrame
			for _, f := range readFrames(t, path) {
				if string(f.e.requestID) == evs[1].RequestID {
					victim = f
				}
			}
			if victim.e.codec != codecS2 {
				t.Fatalf("the stream is stored with codec %d", victim.e.codec)
			}
			journal, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			d.damage(journal[victim.e.bodyOff : victim.e.bodyOff+victim.e.storedLen])
			if err := os.WriteFile(path, journal, 0o600); err != nil {
				t.Fatal(err)
			}
			e.log = nil
			e.reopen(t, Options{})
			for i, ev := range evs {
				rec, err := e.log.Event(ev.RequestID)
				if err != nil {
					t.Fatal(err)
				}
				if i == 1 {
					if !rec.BodiesLost || rec.RequestBody != nil || rec.ResponseBody != nil {
						t.Fatalf("damaged bodies: lost %v, %d and %d bytes returned", rec.BodiesLost, len(rec.RequestBody), len(rec.ResponseBody))
					}
					continue
				}
				if rec.BodiesLost || !bytes.Equal(rec.ResponseBody, ev.ResponseBody) {
					t.Fatalf("%s beside the damage: lost %v", ev.RequestID, rec.BodiesLost)
				}
			}
		})
	}
}

// TestReadRecordChecksCompressedLengths: a version 3 frame whose checksum
// holds but whose compressed bodies claim more than an event may hold, or
// that names no known codec, is a frame this code cannot read, not a torn
// write and not something a read would allocate for.
func TestReadRecordChecksCompressedLengths(t *testing.T) {
	sse := bytes.Repeat([]byte("data: {}\n\n"), 100)
	for _, c := range []struct {
		codec  byte
		stored []byte
	}{{codecS2, s2.Encode(nil, sse)}, {codecZstd, zstdLegacy(sse)}} {
		tests := []struct {
			name            string
			codec           byte
			reqLen, respLen uint64
			ok              bool
		}{
			{"lengths that hold", c.codec, 0, 1000, true},
			{"a request over maxRecord", c.codec, maxRecord + 1, 0, false},
			{"together over maxRecord", c.codec, maxRecord / 2, maxRecord/2 + 1, false},
			{"overflowing", c.codec, math.MaxUint64, 2, false},
			{"an unknown codec", 3, 0, 1000, false},
		}
		for _, tt := range tests {
			t.Run(fmt.Sprintf("codec=%d/%s", c.codec, tt.name), func(t *testing.T) {
				e := entry{tenant: "acme", requestID: []byte("req_x1"), seq: 1, leaf: []byte("{}"),
					reqLen: tt.reqLen, respLen: tt.respLen, codec: tt.codec}
				frame := appendRecord(nil, 0, frameMark{}, &e, c.stored)
				got, _, _, err := readRecord(bytes.NewReader(frame), 0, nil)
				if tt.ok {
					if err != nil || got.codec != c.codec || got.storedLen != uint64(len(c.stored)) || got.reqLen+got.respLen != 1000 {
						t.Fatalf("readRecord = %+v, %v", got, err)
					}
					return
				}
				if err == nil || errors.Is(err, errTorn) {
					t.Fatalf("readRecord = %v, want a frame it cannot read", err)
				}
			})
		}
	}
}

// TestDamagedRecordLengths: an event record in audit.db whose lengths were
// damaged (bbolt keeps no checksum of values) reads as lost bodies, without
// allocating what it claims.
func TestDamagedRecordLengths(t *testing.T) {
	for _, tt := range []struct {
		name string
		at   int // byte offset of the u64 to damage
		v    uint64
	}{
		{"request length", 16, 1 << 40},
		{"response length", 24, math.MaxUint64},
		{"stored length", eventHeaderLenV2 + 1, 1 << 40},
		{"stored length past the journal", eventHeaderLenV2 + 1, 1 << 29},
		{"body offset past the journal", 8, 1 << 40},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Options{})
			ev := streamFor(1, "acme", 100)
			r := e.mustAppend(t, ev)
			if _, err := e.log.Event(ev.RequestID); err != nil { // applied
				t.Fatal(err)
			}
			err := e.log.db.Update(func(tx *bolt.Tx) error {
				b := tx.Bucket(bucketEvents)
				v := bytes.Clone(b.Get(eventKey(r.Day, r.Sequence)))
				binary.BigEndian.PutUint64(v[tt.at:], tt.v)
				return b.Put(eventKey(r.Day, r.Sequence), v)
			})
			if err != nil {
				t.Fatal(err)
			}
			var rec Record
			n := allocated(func() { rec, err = e.log.Event(ev.RequestID) })
			if err != nil || !rec.BodiesLost {
				t.Fatalf("Event = lost %v, %v; want the bodies lost", rec.BodiesLost, err)
			}
			if n > 4<<20 {
				t.Fatalf("allocated %d bytes to read a damaged record", n)
			}
		})
	}
}

// TestAppendStreamCompact: a streamed reply costs the journal a few
// bytes a word, not the ~225 of its SSE.
func TestAppendStreamCompact(t *testing.T) {
	e := newEnv(t, Options{})
	ev := streamEvent(1, 2000)
	e.mustAppend(t, ev)
	frames := readFrames(t, e.journalOf("2026-03-01"))
	if len(frames) != 1 || frames[0].e.codec != codecS2 {
		t.Fatalf("%d frames, the first with codec %d", len(frames), frames[0].e.codec)
	}
	sent := len(ev.RequestBody) + len(ev.ResponseBody)
	if stored := frames[0].e.storedLen; stored*10 > uint64(sent) {
		t.Fatalf("bodies of %d bytes stored in %d", sent, stored)
	}
}
