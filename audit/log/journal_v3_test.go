package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"testing"
)

// appendRecordV3 encodes a frame as Tollgate wrote them before receipts:
// a version 4 frame without its batch record length.
func appendRecordV3(buf []byte, base uint64, m frameMark, e *entry, stored []byte) []byte {
	start := len(buf)
	e.batch = nil
	buf = appendRecord(buf, base, m, e, stored)
	payload := slices.Clone(buf[start+frameHeaderLen:])
	// The batch record length (0) follows the codec, just before the
	// stored bodies.
	at := len(payload) - len(stored) - 2
	payload = append(payload[:at], payload[at+2:]...)
	payload[0] = 3
	buf = buf[:start+frameHeaderLen]
	buf = append(buf, payload...)
	binary.BigEndian.PutUint32(buf[start:], uint32(len(payload)))
	binary.BigEndian.PutUint32(buf[start+4:], crc32.Checksum(payload, castagnoli))
	e.bodyOff -= 2
	return buf
}

// TestReplayVersion3Frames: a journal written before receipts (version 3
// frames) still replays, bodies included; its events have no receipt,
// and new events after them do.
func TestReplayVersion3Frames(t *testing.T) {
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
			leaf: p.tpl.Bytes(seq), reqLen: uint64(p.reqLen), respLen: uint64(p.respLen), codec: p.codec}
		buf = appendRecordV3(buf, end+uint64(len(buf)), frameMark{nonce: e.log.nonce, durable: end}, &en, p.stored)
	}
	appendFile(t, path, buf)

	e.log = nil
	e.reopen(t, Options{})
	if got := e.log.Stats().Replayed; got != 2 {
		t.Fatalf("replayed %d version 3 frames, want 2", got)
	}
	for _, id := range []string{"req_acme1", "req_globex2"} {
		rec, err := e.log.Event(id)
		if err != nil || rec.BodiesLost || !bytes.Contains(rec.RequestBody, []byte(`"n"`)) {
			t.Fatalf("replayed %s: %+v, %v", id, rec, err)
		}
		if _, err := e.log.Receipt("", id); !errors.Is(err, ErrNoReceipt) {
			t.Fatalf("receipt of %s, journaled without one: %v", id, err)
		}
	}
	r := e.mustAppend(t, event(3, "acme"))
	if r.Sequence != 4 || r.Signed() == nil {
		t.Fatalf("next append: sequence %d, receipt %v", r.Sequence, r.Signed())
	}
	if _, err := e.log.Receipt("acme", "req_acme3"); err != nil {
		t.Fatal(err)
	}
}

// TestBatchRecordRoundTrip: a frame's batch record is read back as
// written, and a frame that claims more than a batch record holds is not
// read.
func TestBatchRecordRoundTrip(t *testing.T) {
	rec := batchRecord{size: 3, signedAt: 1772366400, root: bytes.Repeat([]byte{1}, 32),
		certHash: bytes.Repeat([]byte{2}, 32), sig: bytes.Repeat([]byte{3}, 71)}
	e := entry{tenant: "acme", requestID: []byte("req_x1"), seq: 5, leaf: []byte("{}"),
		reqLen: 2, respLen: 2, batch: rec.encode()}
	frame := appendRecord(nil, 0, frameMark{}, &e, []byte("{}{}"))
	got, next, _, err := readRecord(bytes.NewReader(frame), 0, nil)
	if err != nil || next != uint64(len(frame)) || !bytes.Equal(got.batch, e.batch) {
		t.Fatalf("readRecord = %+v, %d, %v", got, next, err)
	}
	back, err := decodeBatchRecord(got.batch)
	if err != nil || back.size != 3 || back.signedAt != rec.signedAt || !bytes.Equal(back.sig, rec.sig) {
		t.Fatalf("decodeBatchRecord = %+v, %v", back, err)
	}
	e.batch = make([]byte, maxBatchRecord+1)
	frame = appendRecord(nil, 0, frameMark{}, &e, []byte("{}{}"))
	if _, _, _, err := readRecord(bytes.NewReader(frame), 0, nil); err == nil || errors.Is(err, errTorn) {
		t.Fatalf("a batch record of %d bytes: %v, want a frame it cannot read", maxBatchRecord+1, err)
	}
}
