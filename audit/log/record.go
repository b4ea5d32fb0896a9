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
// tree, where its bodies sit in its day's journal, and its leaf.
type eventRecord struct {
	leafIndex, bodyOff, reqLen, respLen uint64
	leaf                                []byte
}

const eventHeaderLen = 32

func (r eventRecord) encode() []byte {
	out := make([]byte, 0, eventHeaderLen+len(r.leaf))
	for _, v := range []uint64{r.leafIndex, r.bodyOff, r.reqLen, r.respLen} {
		out = binary.BigEndian.AppendUint64(out, v)
	}
	return append(out, r.leaf...)
}

// decodeEventRecord decodes an event value, copying the leaf out of v.
func decodeEventRecord(v []byte) (eventRecord, error) {
	if len(v) <= eventHeaderLen {
		return eventRecord{}, fmt.Errorf("audit log: malformed event record")
	}
	be := binary.BigEndian
	return eventRecord{
		leafIndex: be.Uint64(v[0:8]), bodyOff: be.Uint64(v[8:16]),
		reqLen: be.Uint64(v[16:24]), respLen: be.Uint64(v[24:32]),
		leaf: append([]byte{}, v[eventHeaderLen:]...),
	}, nil
}
