package log

import (
	"encoding/binary"
	"fmt"
)

// dayState is the seq value of a day: its last sequence and the end of its
// journal, as applied to audit.db.
func dayState(lastSeq, bodyEnd uint64) []byte {
	return binary.BigEndian.AppendUint64(u64(lastSeq), bodyEnd)
}

// parseDayState decodes a seq value; a missing day is (0, 0).
func parseDayState(v []byte) (lastSeq, bodyEnd uint64) {
	if len(v) != 16 {
		return 0, 0
	}
	return binary.BigEndian.Uint64(v[:8]), binary.BigEndian.Uint64(v[8:])
}

// eventRecord is the value of an event: where its leaf sits in its tenant's
// tree, where and how its bodies are stored in its day's journal, and its
// leaf:
//
//	leaf index | body offset | request length | response length (u64 each)
//	| codec (u8) | stored length (u64) | canonical leaf
//
// The lengths are the bodies' as received and sent; the stored bodies are
// storedLen bytes from the body offset, as codec says (codec.go). Records
// of format v2 (before 2026-11-28) have neither codec nor stored length:
// their leaf follows the lengths, and their bodies are stored as they are.
// A record is of format v2 when its 33rd byte is a leaf's first, '{',
// which is no codec.
type eventRecord struct {
	leafIndex, bodyOff, reqLen, respLen uint64
	codec                               byte
	storedLen                           uint64
	leaf                                []byte
}

const (
	eventHeaderLenV2 = 32
	eventHeaderLen   = eventHeaderLenV2 + 1 + 8
)

func (r eventRecord) encode() []byte {
	out := make([]byte, 0, eventHeaderLen+len(r.leaf))
	for _, v := range []uint64{r.leafIndex, r.bodyOff, r.reqLen, r.respLen} {
		out = binary.BigEndian.AppendUint64(out, v)
	}
	out = append(out, r.codec)
	out = binary.BigEndian.AppendUint64(out, r.storedLen)
	return append(out, r.leaf...)
}

// decodeEventRecord decodes an event value, of either format, copying the
// leaf out of v.
func decodeEventRecord(v []byte) (eventRecord, error) {
	if len(v) <= eventHeaderLenV2 {
		return eventRecord{}, fmt.Errorf("audit log: malformed event record")
	}
	be := binary.BigEndian
	r := eventRecord{
		leafIndex: be.Uint64(v[0:8]), bodyOff: be.Uint64(v[8:16]),
		reqLen: be.Uint64(v[16:24]), respLen: be.Uint64(v[24:32]),
	}
	if v[eventHeaderLenV2] == '{' {
		r.codec, r.storedLen = codecNone, r.reqLen+r.respLen
		r.leaf = append([]byte{}, v[eventHeaderLenV2:]...)
		return r, nil
	}
	if len(v) <= eventHeaderLen {
		return eventRecord{}, fmt.Errorf("audit log: malformed event record")
	}
	r.codec, r.storedLen = v[eventHeaderLenV2], be.Uint64(v[eventHeaderLenV2+1:])
	r.leaf = append([]byte{}, v[eventHeaderLen:]...)
	return r, nil
}
