package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// The journal is the log's write-ahead record: one append-only file per UTC
// day in the journal directory holding, in sequence order, every event of the day
// with its leaf and its bodies. Append returns once its batch's single write
// to the journal is fsynced; audit.db (events, trees, heads) is derived from
// the journal by the applier, and on open whatever the journal holds past
// the end audit.db has applied is replayed. Pruning a day past retention is
// unlinking its file: by then audit.db holds everything but the bodies.
//
// A record is a frame: payload length (u32), CRC-32C (Castagnoli) of the
// payload (u32), then the payload:
//
//	version (u8, 4) | journal nonce (8 bytes) | durable end (u64)
//	| sequence (u64) | leaf index (u64)
//	| tenant length (u16) | tenant | request id length (u16) | request id
//	| leaf length (u32) | canonical leaf
//	| request body length (u64) | response body length (u64)
//	| codec (u8) | batch record length (u16) | batch record | stored bodies
//
// The batch record is the signed statement of the receipts of the batch
// the frame starts (batchRecord, receipts.go): only a batch's first frame
// has one, the others a length of 0, as every frame of a log without a
// signer. Version 3 frames, from before 2026-11-28 receipts, have no batch
// record length.
// The journal nonce is the log's own (frameMark); the durable end is how
// much of the day's journal had been synced when the frame's batch was
// written. The body lengths are the bodies' as received and sent; the
// stored bodies, the rest of the payload, are the request body then the
// response body as they are (codec 0) or as one zstd frame (codec 1,
// codec.go). Version 2 frames, from before 2026-11-28, have no codec and
// hold the bodies as they are; version 1 frames, from before 2026-11-27,
// have no nonce and durable end either. Both are still read. Integers are
// big-endian. docs/audit-format.md describes the layout.

// JournalDir is the default directory of journal files, in the log's
// directory; Options.JournalDir puts them elsewhere.
const JournalDir = "journal"

const (
	journalSuffix  = ".journal"
	frameHeaderLen = 8
	journalVersion = 4
	// recordFixedLen is the fixed part of a version 4 payload; a version
	// 3 payload lacks the batch record length, a version 2 payload the
	// codec too, and a version 1 payload the nonce and the durable end
	// too.
	recordFixedLen   = recordFixedLenV3 + 2
	recordFixedLenV3 = recordFixedLenV2 + 1
	recordFixedLenV2 = 1 + nonceLen + 8 + recordFixedLenV1 - 1
	recordFixedLenV1 = 1 + 8 + 8 + 2 + 2 + 4 + 8 + 8
	nonceLen         = 8
	// maxRecord bounds a frame (the payload length is a u32; tenant and
	// request ids, checked by ids, are far below their u16 lengths).
	maxRecord = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// frameMark is what each version 2 frame carries besides its event.
//
// nonce is the log's journal nonce: random, made when audit.db is created
// and never shown outside the log's files. Recovery trusts a frame it
// finds past damage only when it carries the nonce, so bytes that merely
// look like a frame (one inside a request body, say) prove nothing.
//
// durable is the end of the day's journal that syncs had covered, and
// the log acknowledged, when the frame's batch was written. A later frame
// whose durable end lies past damaged bytes proves those bytes were
// acknowledged: recovery then refuses to cut them as a torn write.
type frameMark struct {
	nonce   [nonceLen]byte
	durable uint64
}

// entry is one journal record without its bodies: what the applier stores
// in audit.db.
type entry struct {
	tenant    string
	requestID []byte
	seq       uint64
	leafIndex uint64
	leaf      []byte
	leafHash  []byte
	// mark is the frame's mark as read back (zero for a version 1 frame).
	mark frameMark
	// reqLen and respLen are the bodies' lengths as received and sent.
	// They are stored from bodyOff in the day's journal, storedLen bytes
	// encoded as codec says.
	reqLen, respLen    uint64
	codec              byte
	bodyOff, storedLen uint64
	// batch is the batch record of the batch the entry starts, if any
	// (receipts.go).
	batch []byte
}

func (e *entry) record() eventRecord {
	return eventRecord{leafIndex: e.leafIndex, bodyOff: e.bodyOff, reqLen: e.reqLen, respLen: e.respLen,
		codec: e.codec, storedLen: e.storedLen, leaf: e.leaf}
}

// recordLen is the size of e's frame with its stored bodies.
func recordLen(tenant string, requestID, leaf []byte, bodies int) int {
	return frameHeaderLen + recordFixedLen + maxBatchRecord + len(tenant) + len(requestID) + len(leaf) + bodies
}

// appendRecord appends e's frame, marked with m, with its bodies stored
// as e.codec says (request then response) to buf, whose first byte sits
// at offset base of the journal, and sets e.bodyOff and e.storedLen.
func appendRecord(buf []byte, base uint64, m frameMark, e *entry, stored []byte) []byte {
	start := len(buf)
	be := binary.BigEndian
	buf = append(buf, 0, 0, 0, 0, 0, 0, 0, 0) // frame header, filled below
	buf = append(buf, journalVersion)
	buf = append(buf, m.nonce[:]...)
	buf = be.AppendUint64(buf, m.durable)
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
	buf = append(buf, e.codec)
	buf = be.AppendUint16(buf, uint16(len(e.batch)))
	buf = append(buf, e.batch...)
	e.bodyOff, e.storedLen = base+uint64(len(buf)), uint64(len(stored))
	buf = append(buf, stored...)
	payload := buf[start+frameHeaderLen:]
	be.PutUint32(buf[start:], uint32(len(payload)))
	be.PutUint32(buf[start+4:], crc32.Checksum(payload, castagnoli))
	return buf
}

// errTorn: the journal ends in an incomplete or damaged frame.
var errTorn = errors.New("torn record")

// readRecord reads the frame at off from r. It returns errTorn for a frame
// cut short, failing its checksum or of a size no frame has (a write that
// did not complete), and io.EOF at the end of the file or of the frames (a
// zero header: the file is zero-filled ahead of its frames, see
// journalFile).
func readRecord(r io.ReaderAt, off uint64, buf []byte) (entry, uint64, []byte, error) {
	var hdr [frameHeaderLen]byte
	n, err := r.ReadAt(hdr[:], int64(off))
	if n == 0 && errors.Is(err, io.EOF) {
		return entry{}, off, buf, io.EOF
	}
	if n < frameHeaderLen {
		if errors.Is(err, io.EOF) {
			return entry{}, off, buf, fmt.Errorf("%w: %d header bytes at %d", errTorn, n, off)
		}
		return entry{}, off, buf, err
	}
	if hdr == [frameHeaderLen]byte{} {
		return entry{}, off, buf, io.EOF // the zero-filled space past the last frame
	}
	be := binary.BigEndian
	size := be.Uint32(hdr[:4])
	// The committer never writes a frame over maxRecord (prepare refuses
	// such an event): a larger size is damage, not a frame to allocate.
	if size < recordFixedLenV1 || size > maxRecord {
		return entry{}, off, buf, fmt.Errorf("%w: frame of %d bytes at %d", errTorn, size, off)
	}
	if cap(buf) < int(size) {
		// A damaged header can claim up to maxRecord: see whether the
		// file holds that much before allocating it.
		var last [1]byte
		if n, err := r.ReadAt(last[:], int64(off+frameHeaderLen+uint64(size)-1)); n == 0 {
			if errors.Is(err, io.EOF) {
				return entry{}, off, buf, fmt.Errorf("%w: frame at %d claims %d bytes past the end", errTorn, off, size)
			}
			return entry{}, off, buf, err
		}
		buf = make([]byte, size)
	}
	payload := buf[:size]
	if n, err := r.ReadAt(payload, int64(off+frameHeaderLen)); n < len(payload) {
		if errors.Is(err, io.EOF) {
			return entry{}, off, buf, fmt.Errorf("%w: frame at %d cut at %d of %d bytes", errTorn, off, n, size)
		}
		return entry{}, off, buf, err
	}
	if crc32.Checksum(payload, castagnoli) != be.Uint32(hdr[4:]) {
		return entry{}, off, buf, fmt.Errorf("%w: checksum mismatch in frame at %d", errTorn, off)
	}
	e, err := decodePayload(payload, off+frameHeaderLen)
	if err != nil {
		// The checksum held: this is not a torn write but a frame this
		// code cannot read.
		return entry{}, off, buf, fmt.Errorf("audit log: journal frame at %d: %w", off, err)
	}
	return e, off + frameHeaderLen + uint64(size), buf, nil
}

// decodePayload decodes a checked payload that starts at offset base,
// copying what the entry keeps.
func decodePayload(p []byte, base uint64) (entry, error) {
	be := binary.BigEndian
	pos := 0
	need := func(n int) bool { return len(p)-pos >= n }
	var e entry
	version := p[0]
	switch version {
	case journalVersion, 3, 2:
		if version == journalVersion && len(p) < recordFixedLen || version == 3 && len(p) < recordFixedLenV3 || len(p) < recordFixedLenV2 {
			return entry{}, errors.New("short frame")
		}
		copy(e.mark.nonce[:], p[1:])
		e.mark.durable = be.Uint64(p[1+nonceLen:])
		pos = 1 + nonceLen + 8
	case 1:
		pos = 1
	default:
		return entry{}, fmt.Errorf("record version %d", p[0])
	}
	e.seq, e.leafIndex = be.Uint64(p[pos:]), be.Uint64(p[pos+8:])
	pos += 16
	n := int(be.Uint16(p[pos:]))
	pos += 2
	if !need(n + 2) {
		return entry{}, errors.New("short tenant")
	}
	e.tenant = string(p[pos : pos+n])
	pos += n
	n = int(be.Uint16(p[pos:]))
	pos += 2
	if !need(n + 4) {
		return entry{}, errors.New("short request id")
	}
	e.requestID = append([]byte{}, p[pos:pos+n]...)
	pos += n
	n = int(be.Uint32(p[pos:]))
	pos += 4
	lengths := 16
	switch version {
	case journalVersion:
		lengths += 3 // the codec, the batch record length
	case 3:
		lengths++ // the codec
	}
	if !need(n + lengths) {
		return entry{}, errors.New("short leaf")
	}
	e.leaf = append([]byte{}, p[pos:pos+n]...)
	pos += n
	e.reqLen, e.respLen = be.Uint64(p[pos:]), be.Uint64(p[pos+8:])
	pos += 16
	if version >= 3 {
		e.codec = p[pos]
		pos++
	}
	if version == journalVersion {
		n := int(be.Uint16(p[pos:]))
		pos += 2
		if !need(n) || n > maxBatchRecord {
			return entry{}, fmt.Errorf("batch record of %d bytes", n)
		}
		if n > 0 {
			e.batch = append([]byte{}, p[pos:pos+n]...)
		}
		pos += n
	}
	e.bodyOff, e.storedLen = base+uint64(pos), uint64(len(p)-pos)
	switch e.codec {
	case codecNone:
		// Each length on its own: their sum can overflow to the right size.
		if rest := e.storedLen; e.reqLen > rest || e.respLen != rest-e.reqLen {
			return entry{}, fmt.Errorf("bodies of %d bytes, lengths say %d and %d", rest, e.reqLen, e.respLen)
		}
	case codecS2, codecZstd:
		// What a read decompresses them to: bounded as Append bounds it.
		if err := checkBodyLengths(e.reqLen, e.respLen, e.storedLen); err != nil {
			return entry{}, err
		}
	default:
		return entry{}, fmt.Errorf("bodies stored with codec %d", e.codec)
	}
	return e, nil
}
