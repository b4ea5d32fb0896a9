package log

import (
	"bytes"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestZstdBodiesStillRead: events whose bodies were journaled as zstd
// frames (codecZstd, what the log wrote before codecS2) replay into
// audit.db, read back byte for byte beside the S2 events appended since,
// and read the same once applied, after another open.
func TestZstdBodiesStillRead(t *testing.T) {
	e := newEnv(t, Options{})
	e.mustAppend(t, event(0, "acme"))
	path, end := e.closedJournal(t)
	old := []Event{streamFor(1, "acme", 300), event(2, "globex"), streamFor(3, "globex", 20)}
	old[1].RequestBody = bytes.Repeat([]byte(`{"role":"user","content":"abcdefgh"}`), 30)
	var buf []byte
	for i, ev := range old {
		p, err := e.log.prepare(ev)
		if err != nil {
			t.Fatal(err)
		}
		bodies := append(bytes.Clone(ev.RequestBody), ev.ResponseBody...)
		stored := zstdLegacy(bodies)
		if len(stored) >= len(bodies) {
			t.Fatalf("event %d: zstd does not compress its bodies", i)
		}
		seq := uint64(2 + i)
		en := entry{tenant: p.tenant, requestID: p.requestID, seq: seq, leafIndex: []uint64{1, 0, 1}[i],
			leaf: p.tpl.Bytes(seq), reqLen: uint64(p.reqLen), respLen: uint64(p.respLen), codec: codecZstd}
		buf = appendRecord(buf, end+uint64(len(buf)), frameMark{nonce: e.log.nonce, durable: end}, &en, stored)
	}
	appendFile(t, path, buf)

	e.log = nil
	e.reopen(t, Options{})
	if got := e.log.Stats().Replayed; got != uint64(len(old)) {
		t.Fatalf("replayed %d zstd frames, want %d", got, len(old))
	}
	fresh := streamFor(4, "acme", 300)
	e.mustAppend(t, fresh)
	check := func(t *testing.T) {
		t.Helper()
		for _, ev := range append(old, fresh) {
			rec, err := e.log.Event(ev.RequestID)
			if err != nil || rec.BodiesLost || !bytes.Equal(rec.RequestBody, ev.RequestBody) || !bytes.Equal(rec.ResponseBody, ev.ResponseBody) {
				t.Fatalf("%s: lost %v, %d and %d bytes, %v", ev.RequestID, rec.BodiesLost, len(rec.RequestBody), len(rec.ResponseBody), err)
			}
		}
	}
	check(t)
	e.reopen(t, Options{})
	check(t)
	// audit.db records the codec each was stored with.
	err := e.log.db.View(func(tx *bolt.Tx) error {
		for seq, want := range map[uint64]byte{2: codecZstd, 3: codecZstd, 4: codecZstd, 5: codecS2} {
			r, err := decodeEventRecord(tx.Bucket(bucketEvents).Get(eventKey("2026-03-01", seq)))
			if err != nil {
				return err
			}
			if r.codec != want {
				t.Errorf("event %d stored with codec %d, want %d", seq, r.codec, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
