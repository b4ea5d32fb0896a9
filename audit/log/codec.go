package log

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// An event's two bodies are stored together, the request body then the
// response body: as they are (codecNone), or as one S2 block (codecS2,
// github.com/klauspost/compress/s2). Logs written before codecS2 hold
// bodies as one zstd frame (codecZstd, RFC 8878), which reads still
// decode; nothing writes them any more. A stream's SSE repeats the same
// JSON around every token, so a reply costs 40-100 bytes of SSE a token
// as sent and a few bytes compressed.
//
// S2, not zstd: bodies are compressed on the request's path, and zstd's
// setup for each call (its entropy tables) cost 15-30 µs of CPU for a 1-2
// KB chat request and reply; zstd cost 5-8 times S2's CPU at every size
// measured, for 0.6-0.8 times S2's stored bytes (docs/measurements.md).
//
// The leaf's SHA-256 digests are of the bodies as received and sent,
// computed before compression, and a read decompresses and checks the
// bodies against them (Log.Event). A stored body never decompresses to more
// than the lengths its frame and record give, which never exceed maxRecord:
// anything else is damage, refused without allocating more.
const (
	codecNone byte = 0
	codecZstd byte = 1 // read only: written before codecS2
	codecS2   byte = 2
)

// minCompress is the least size of bodies worth compressing: below it an
// S2 block (a length and a literal's tag) rarely saves anything.
const minCompress = 64

// decodeSlack is the room left past the bodies' length for the zstd
// block that would overrun it (a zstd block decodes to at most 128 KiB).
const decodeSlack = 128<<10 + 64

// errBodiesDamaged: stored bodies that cannot be what their frame or
// record says they are.
var errBodiesDamaged = errors.New("stored bodies damaged")

// bodyDecoder decompresses the zstd bodies of older logs for reads.
// DecodeAll is safe for concurrent use. It decodes at most the capacity of
// the buffer it is given (WithDecodeAllCapLimit), which decodeBodies sizes
// to the bodies' recorded length (and a block), and never more than
// maxRecord. A single segment frame's window is its content size: up to
// maxRecord, which DecodeAll does not allocate as a window (it decodes
// into the buffer).
var bodyDecoder = sync.OnceValue(func() *zstd.Decoder {
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderMaxMemory(maxRecord),
		zstd.WithDecoderMaxWindow(maxRecord))
	if err != nil {
		panic(fmt.Sprintf("audit log: zstd decoder: %v", err))
	}
	return dec
})

// compressBodies returns how to store bodies: compressed when that makes
// them smaller, else as they are (small or incompressible bodies). stored
// is a new slice of its own length, which the pending append holds until
// its commit; bodies is not kept. S2 encodes on the caller's goroutine
// with no shared state: appends compress in parallel, waking no one.
func compressBodies(bodies []byte) (codec byte, stored []byte) {
	if len(bodies) < minCompress {
		return codecNone, bytes.Clone(bodies)
	}
	// s2.Encode allocates unless dst holds its worst case.
	scratch := getScratch(s2.MaxEncodedLen(len(bodies)))
	defer putScratch(scratch)
	out := s2.Encode((*scratch)[:0], bodies)
	if len(out) >= len(bodies) {
		return codecNone, bytes.Clone(bodies)
	}
	return codecS2, bytes.Clone(out)
}

// scratches are buffers for an append's copy of its bodies and their
// compression, which it drops once it holds the stored bytes: without
// them a streamed event would leave two copies of its SSE to the
// collector. Buffers over maxScratch are not kept.
var scratches sync.Pool

const maxScratch = 1 << 20

// getScratch returns an empty buffer of at least n bytes' capacity.
func getScratch(n int) *[]byte {
	if p, ok := scratches.Get().(*[]byte); ok {
		if cap(*p) >= n {
			return p
		}
		scratches.Put(p)
	}
	b := make([]byte, 0, max(n, 4<<10))
	return &b
}

func putScratch(p *[]byte) {
	if cap(*p) <= maxScratch {
		scratches.Put(p)
	}
}

// checkBodyLengths refuses the lengths of bodies no append could have
// stored: each, and their sum, at most maxRecord (Append refuses larger
// events). It bounds what a read allocates for a damaged frame or record.
func checkBodyLengths(reqLen, respLen, storedLen uint64) error {
	if reqLen > maxRecord || respLen > maxRecord-reqLen || storedLen > maxRecord {
		return fmt.Errorf("%w: bodies of %d and %d bytes stored in %d, over the %d an event may hold",
			errBodiesDamaged, reqLen, respLen, storedLen, maxRecord)
	}
	return nil
}

// decodeBodies returns the n bytes of bodies stored as codec. It never
// returns, nor decompresses to, more than n bytes (at most maxRecord):
// stored bytes that are not exactly n bytes of bodies are damage.
func decodeBodies(codec byte, stored []byte, n uint64) ([]byte, error) {
	if n > maxRecord {
		return nil, fmt.Errorf("%w: %d bytes of bodies, over the %d an event may hold", errBodiesDamaged, n, maxRecord)
	}
	switch codec {
	case codecNone:
		if uint64(len(stored)) != n {
			return nil, fmt.Errorf("%w: %d bytes stored for %d", errBodiesDamaged, len(stored), n)
		}
		return stored, nil
	case codecS2:
		// The block states its decoded length first: another length is
		// refused before anything is allocated or decoded.
		m, err := s2.DecodedLen(stored)
		if err != nil {
			return nil, fmt.Errorf("%w: an S2 block's length: %w", errBodiesDamaged, err)
		}
		if uint64(m) != n {
			return nil, fmt.Errorf("%w: an S2 block of %d bytes for %d", errBodiesDamaged, m, n)
		}
		out, err := s2.Decode(make([]byte, n), stored)
		if err != nil {
			return nil, fmt.Errorf("%w: s2: %w", errBodiesDamaged, err)
		}
		if uint64(len(out)) != n {
			return nil, fmt.Errorf("%w: %d bytes decompressed for %d", errBodiesDamaged, len(out), n)
		}
		return out, nil
	case codecZstd:
		// Older logs wrote one frame that states its content size (EncodeAll
		// does): a frame stating another size, or none, is refused before
		// decoding anything.
		var h zstd.Header
		if err := h.Decode(stored); err != nil {
			return nil, fmt.Errorf("%w: zstd: %w", errBodiesDamaged, err)
		}
		if h.Skippable || !h.HasFCS || h.FrameContentSize != n {
			return nil, fmt.Errorf("%w: a zstd frame of %d bytes (stated: %v) for %d", errBodiesDamaged, h.FrameContentSize, h.HasFCS, n)
		}
		// The decoder stops with an error once a block takes the output
		// past the stated size; the room for one block past it keeps that
		// block from growing the buffer.
		out, err := bodyDecoder().DecodeAll(stored, make([]byte, 0, n+decodeSlack))
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %w", errBodiesDamaged, err)
		}
		if uint64(len(out)) != n {
			return nil, fmt.Errorf("%w: %d bytes decompressed for %d", errBodiesDamaged, len(out), n)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("%w: unknown codec %d", errBodiesDamaged, codec)
	}
}
