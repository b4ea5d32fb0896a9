package responsestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/pipeline"
)

// entryVersion is the first byte of every entry: a later format reads
// this one, or refuses it by name.
const entryVersion = 1

// entry is a stored response with what the store keeps beside it. Its
// encoding (the value under tenant 0x00 id):
//
//	version  1 byte (entryVersion)
//	seq      uint64, big-endian: its key in the order bucket
//	expires  int64, big-endian: Unix nanoseconds
//	size     int64, big-endian: pipeline.ResponseSize
//	body     uvarint length, bytes
//	history  uvarint count, then each message: uvarint length, its
//	         protobuf encoding (inferencev1.Message)
type entry struct {
	seq     uint64
	expires time.Time
	size    int64
	resp    pipeline.StoredResponse
}

// headerLen is the fixed part of an entry: version, seq, expires, size.
const headerLen = 1 + 8 + 8 + 8

func encodeEntry(e entry) []byte {
	b := make([]byte, 0, headerLen+binary.MaxVarintLen64+len(e.resp.Body)+int(e.size)-len(e.resp.Body)+binary.MaxVarintLen64*(1+len(e.resp.History)))
	b = append(b, entryVersion)
	b = binary.BigEndian.AppendUint64(b, e.seq)
	b = binary.BigEndian.AppendUint64(b, uint64(e.expires.UnixNano()))
	b = binary.BigEndian.AppendUint64(b, uint64(e.size))
	b = binary.AppendUvarint(b, uint64(len(e.resp.Body)))
	b = append(b, e.resp.Body...)
	b = binary.AppendUvarint(b, uint64(len(e.resp.History)))
	for _, m := range e.resp.History {
		b = binary.AppendUvarint(b, uint64(proto.Size(m)))
		// Deterministic is not needed: the bytes are only read back.
		b, _ = proto.MarshalOptions{}.MarshalAppend(b, m)
	}
	return b
}

var errTruncated = errors.New("stored response entry truncated")

// decodeHeader reads an entry's fixed part.
func decodeHeader(v []byte) (entry, error) {
	if len(v) < headerLen {
		return entry{}, errTruncated
	}
	if v[0] != entryVersion {
		return entry{}, fmt.Errorf("stored response entry of version %d; this tollgate reads version %d", v[0], entryVersion)
	}
	return entry{
		seq:     binary.BigEndian.Uint64(v[1:]),
		expires: time.Unix(0, int64(binary.BigEndian.Uint64(v[9:]))),
		size:    int64(binary.BigEndian.Uint64(v[17:])),
	}, nil
}

// decodeEntry reads a whole entry. What it returns is copied out of v,
// which bbolt owns only during its transaction.
func decodeEntry(v []byte) (entry, error) {
	e, err := decodeHeader(v)
	if err != nil {
		return e, err
	}
	rest := v[headerLen:]
	next := func() ([]byte, error) {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return nil, errTruncated
		}
		b := rest[k : k+int(n)]
		rest = rest[k+int(n):]
		return b, nil
	}
	body, err := next()
	if err != nil {
		return e, err
	}
	e.resp.Body = append([]byte(nil), body...)
	count, k := binary.Uvarint(rest)
	if k <= 0 || count > uint64(len(rest)) {
		return e, errTruncated
	}
	rest = rest[k:]
	e.resp.History = make([]*inferencev1.Message, 0, count)
	for range count {
		b, err := next()
		if err != nil {
			return e, err
		}
		m := &inferencev1.Message{}
		if err := proto.Unmarshal(b, m); err != nil {
			return e, fmt.Errorf("stored response message: %w", err)
		}
		e.resp.History = append(e.resp.History, m)
	}
	if len(rest) != 0 {
		return e, fmt.Errorf("stored response entry has %d bytes past its end", len(rest))
	}
	return e, nil
}

// order is an order bucket's value: what a sweep or an eviction needs
// without reading the entry.
//
//	expires  int64, big-endian: Unix nanoseconds
//	size     int64, big-endian
//	key      the entry's key (the rest)
type order struct {
	expires time.Time
	size    int64
	key     []byte
}

func encodeOrder(o order) []byte {
	b := make([]byte, 0, 16+len(o.key))
	b = binary.BigEndian.AppendUint64(b, uint64(o.expires.UnixNano()))
	b = binary.BigEndian.AppendUint64(b, uint64(o.size))
	return append(b, o.key...)
}

// decodeOrder reads an order value; its key is copied out of v.
func decodeOrder(v []byte) (order, error) {
	if len(v) < 16 {
		return order{}, errors.New("stored response order value truncated")
	}
	return order{
		expires: time.Unix(0, int64(binary.BigEndian.Uint64(v))),
		size:    int64(binary.BigEndian.Uint64(v[8:])),
		key:     append([]byte(nil), v[16:]...),
	}, nil
}
