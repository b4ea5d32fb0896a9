package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"sync"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// zstdLegacy compresses bodies as the log did before codecS2 (codecZstd):
// one frame at the fastest level, its content size stated, no checksum.
func zstdLegacy(bodies []byte) []byte {
	return legacyEncoder().EncodeAll(bodies, nil)
}

var legacyEncoder = sync.OnceValue(func() *zstd.Encoder {
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderCRC(false),
		zstd.WithSingleSegment(true))
	if err != nil {
		panic(err)
	}
	return enc
})

// allocated returns the bytes f allocates (the heap's total, so run
// nothing beside it).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// zstdBombs returns n zero bytes compressed as the log compresses bodies
// (one frame stating its size) and as a stream, whose frame states none.
func zstdBombs(t *testing.T, n int) (withSize, stream []byte) {
	t.Helper()
	zeros := make([]byte, n)
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(zeros); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var h zstd.Header
	if err := h.Decode(buf.Bytes()); err != nil || h.HasFCS {
		t.Fatalf("the stream's header %+v, %v: states its size", h, err)
	}
	return zstdLegacy(zeros), buf.Bytes()
}

// TestDecodeBodiesBounded: stored bodies decompress to exactly the length
// their frame or record gives, never more; compressed data that would
// (a frame or block claiming more, a zstd bomb with or without its size
// in the header, an S2 block of zeros) is refused as damage without
// allocating what it claims.
func TestDecodeBodiesBounded(t *testing.T) {
	const bomb = 256 << 20 // decompresses to 256 MiB of zeros
	withSize, stream := zstdBombs(t, bomb)
	body := []byte(`{"role":"user","content":"hello"}` + `{"role":"assistant","content":"hello"}`)
	good := zstdLegacy(body)
	// A frame that states 200 KiB and holds a MiB: it decodes past the
	// size it states.
	liar := zstdLegacy(bytes.Repeat([]byte("data: {}\n\n"), 100<<10))
	var h zstd.Header
	if err := h.Decode(liar); err != nil || !h.SingleSegment || h.FrameContentSize != 1000<<10 {
		t.Fatalf("header %+v, %v: not the frame the test patches", h, err)
	}
	binary.LittleEndian.PutUint32(liar[h.HeaderSize-4:], 200<<10)
	// S2: 16 MiB of zeros in ~1 KiB; a block stating 1,000 bytes that
	// holds 2,000 (both lengths are two-byte varints).
	s2Bomb := s2.Encode(nil, make([]byte, 16<<20))
	s2Good := s2.Encode(nil, body)
	s2Liar := s2.Encode(nil, bytes.Repeat([]byte("data: {}\n\n"), 200))
	if m, err := s2.DecodedLen(s2Liar); err != nil || m != 2000 {
		t.Fatalf("S2 block of %d bytes, %v: not the block the test patches", m, err)
	}
	binary.PutUvarint(s2Liar, 1000)
	tests := []struct {
		name   string
		codec  byte
		stored []byte
		n      uint64
	}{
		{"an S2 bomb, for 1 KiB", codecS2, s2Bomb, 1 << 10},
		{"an S2 bomb, for a byte less", codecS2, s2Bomb, 16<<20 - 1},
		{"an S2 block stating less than it holds", codecS2, s2Liar, 1000},
		{"S2 bodies shorter than their length", codecS2, s2Good, uint64(len(body)) + 1},
		{"S2 bodies longer than their length", codecS2, s2Good, uint64(len(body)) - 1},
		{"an S2 length over maxRecord", codecS2, s2Good, maxRecord + 1},
		{"an S2 block, the largest length", codecS2, s2Good, math.MaxUint64},
		{"not S2", codecS2, body, uint64(len(body))},
		{"nothing, as S2", codecS2, nil, 0},
		{"an S2 length past 32 bits", codecS2, binary.AppendUvarint(nil, 1<<33), 1 << 33},
		{"a bomb with its size, for 1 KiB", codecZstd, withSize, 1 << 10},
		{"a bomb with its size, for a byte less", codecZstd, withSize, bomb - 1},
		{"a frame stating less than it holds", codecZstd, liar, 200 << 10},
		{"a bomb without its size, for 1 KiB", codecZstd, stream, 1 << 10},
		{"a bomb without its size, for 16 MiB", codecZstd, stream, 16 << 20},
		{"bodies shorter than their length", codecZstd, good, uint64(len(body)) + 1},
		{"bodies longer than their length", codecZstd, good, uint64(len(body)) - 1},
		{"a length over maxRecord", codecZstd, good, maxRecord + 1},
		{"the largest length", codecZstd, good, math.MaxUint64},
		{"not zstd", codecZstd, body, uint64(len(body))},
		{"nothing", codecZstd, nil, uint64(len(body))},
		{"raw bodies of another length", codecNone, body, uint64(len(body)) + 1},
		{"an unknown codec", 7, body, uint64(len(body))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out []byte
			var err error
			n := allocated(func() { out, err = decodeBodies(tt.codec, tt.stored, tt.n) })
			if !errors.Is(err, errBodiesDamaged) || out != nil {
				t.Fatalf("decodeBodies = %d bytes, %v; want errBodiesDamaged", len(out), err)
			}
			// What the length allows (a damaged length states anything:
			// bounded by maxRecord), and a block past it.
			limit := uint64(1 << 20)
			if tt.n <= maxRecord {
				limit += tt.n
			}
			if n > limit {
				t.Fatalf("allocated %d bytes to refuse bodies of %d, over %d", n, tt.n, limit)
			}
		})
	}
	for _, c := range []struct {
		codec  byte
		stored []byte
	}{{codecZstd, good}, {codecS2, s2Good}, {codecNone, body}} {
		out, err := decodeBodies(c.codec, c.stored, uint64(len(body)))
		if err != nil || !bytes.Equal(out, body) {
			t.Fatalf("decodeBodies of good bodies as codec %d = %q, %v", c.codec, out, err)
		}
	}
}

// TestCompressBodies: compressBodies stores S2 when that is smaller, the
// bodies as they are otherwise, and what it stores decodes to the bodies.
func TestCompressBodies(t *testing.T) {
	tests := []struct {
		name   string
		bodies []byte
		codec  byte
	}{
		{"nothing", nil, codecNone},
		{"under minCompress", bytes.Repeat([]byte("a"), minCompress-1), codecNone},
		{"minCompress of one byte", bytes.Repeat([]byte("a"), minCompress), codecS2},
		{"a chat request and reply", []byte(`{"model":"m","messages":[{"role":"user","content":"hello big world"}]}` +
			`{"id":"req_0","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello big world","refusal":null},"finish_reason":"stop","logprobs":null}],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}`), codecS2},
		{"a stream", append(bytes.Clone(streamEvent(1, 300).RequestBody), streamEvent(1, 300).ResponseBody...), codecS2},
		{"random", randomBytes(4000), codecNone},
		{"over maxScratch", bytes.Repeat([]byte("data: {}\n\n"), 2*maxScratch/10), codecS2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			codec, stored := compressBodies(tt.bodies)
			if codec != tt.codec {
				t.Fatalf("codec %d, want %d", codec, tt.codec)
			}
			if codec != codecNone && len(stored) >= len(tt.bodies) {
				t.Fatalf("compressed %d bytes to %d", len(tt.bodies), len(stored))
			}
			out, err := decodeBodies(codec, stored, uint64(len(tt.bodies)))
			if err != nil || !bytes.Equal(out, tt.bodies) {
				t.Fatalf("decodeBodies = %d bytes, %v", len(out), err)
			}
		})
	}
}

// TestCompressBodiesAllocs: compressing an append's bodies allocates only
// the stored copy (the scratch buffers are pooled, S2 keeps no state).
func TestCompressBodiesAllocs(t *testing.T) {
	ev := streamEvent(1, 100)
	bodies := append(bytes.Clone(ev.RequestBody), ev.ResponseBody...)
	compressBodies(bodies) // fills the pool
	if n := testing.AllocsPerRun(100, func() { compressBodies(bodies) }); n > 2 {
		t.Fatalf("%.1f allocations a call", n)
	}
}

// FuzzDecodeBodies: whatever the stored zstd the stored bytes, decodeBodies returns
// exactly the length asked for or damage, without panicking.
func FuzzDecodeBodies(f *testing.F) {
	f.Add(zstdLegacy(bytes.Repeat([]byte("data: {}\n\n"), 50)), uint32(500))
	f.Add(zstdLegacy(make([]byte, 1<<20)), uint32(1000))
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0x58, 0, 0, 0}, uint32(0))
	f.Fuzz(func(t *testing.T, stored []byte, n uint32) {
		n %= 4 << 20
		out, err := decodeBodies(codecZstd, stored, uint64(n))
		if err == nil && uint64(len(out)) != uint64(n) {
			t.Fatalf("decoded %d bytes for %d", len(out), n)
		}
		if err != nil && !errors.Is(err, errBodiesDamaged) {
			t.Fatalf("error %v is not errBodiesDamaged", err)
		}
	})
}

// FuzzDecodeBodiesS2: whatever the stored S2 bytes, decodeBodies returns
// exactly the length asked for or damage, without panicking.
func FuzzDecodeBodiesS2(f *testing.F) {
	f.Add(s2.Encode(nil, bytes.Repeat([]byte("data: {}\n\n"), 50)), uint32(500))
	f.Add(s2.Encode(nil, make([]byte, 1<<20)), uint32(1000))
	f.Add([]byte{0xe8, 0x07, 0x00}, uint32(1000))
	f.Fuzz(func(t *testing.T, stored []byte, n uint32) {
		n %= 4 << 20
		out, err := decodeBodies(codecS2, stored, uint64(n))
		if err == nil && uint64(len(out)) != uint64(n) {
			t.Fatalf("decoded %d bytes for %d", len(out), n)
		}
		if err != nil && !errors.Is(err, errBodiesDamaged) {
			t.Fatalf("error %v is not errBodiesDamaged", err)
		}
	})
}
