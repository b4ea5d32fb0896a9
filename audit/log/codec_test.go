package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"
)

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
	return bodyEncoder().EncodeAll(zeros, nil), buf.Bytes()
}

// TestDecodeBodiesBounded: stored bodies decompress to exactly the length
// their frame or record gives, never more; compressed data that would
// (a frame claiming more, a zstd bomb with or without its size in the
// header) is refused as damage without allocating what it claims.
func TestDecodeBodiesBounded(t *testing.T) {
	const bomb = 256 << 20 // decompresses to 256 MiB of zeros
	withSize, stream := zstdBombs(t, bomb)
	body := []byte(`{"role":"user","content":"hello"}` + `{"role":"assistant","content":"hello"}`)
	good := bodyEncoder().EncodeAll(body, nil)
	// A frame that states 200 KiB and holds a MiB: it decodes past the
	// size it states.
	liar := bodyEncoder().EncodeAll(bytes.Repeat([]byte("data: {}\n\n"), 100<<10), nil)
	var h zstd.Header
	if err := h.Decode(liar); err != nil || !h.SingleSegment || h.FrameContentSize != 1000<<10 {
		t.Fatalf("header %+v, %v: not the frame the test patches", h, err)
	}
	binary.LittleEndian.PutUint32(liar[h.HeaderSize-4:], 200<<10)
	tests := []struct {
		name   string
		codec  byte
		stored []byte
		n      uint64
	}{
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
	out, err := decodeBodies(codecZstd, good, uint64(len(body)))
	if err != nil || !bytes.Equal(out, body) {
		t.Fatalf("decodeBodies of good bodies = %q, %v", out, err)
	}
}

// FuzzDecodeBodies: whatever the stored bytes, decodeBodies returns
// exactly the length asked for or damage, without panicking.
func FuzzDecodeBodies(f *testing.F) {
	f.Add(bodyEncoder().EncodeAll(bytes.Repeat([]byte("data: {}\n\n"), 50), nil), uint32(500))
	f.Add(bodyEncoder().EncodeAll(make([]byte, 1<<20), nil), uint32(1000))
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
