package readsized

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestBuffer: the buffer is sized from the announced length only up to
// StartMax, grows with what arrives, never past the announced size (plus
// the byte that sees EOF), and a read that fails keeps what had arrived.
func TestBuffer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		announced int64
		body      string
		err       error // the reader's, after body
		// maxCap bounds the buffer's capacity once the body is read.
		maxCap int
	}{
		{"short body under a large announcement", 8 << 20, "hello", nil, StartMax},
		{"nothing under a large announcement", 8 << 20, "", nil, StartMax},
		{"body cut short under a large announcement", 8 << 20, "part", io.ErrUnexpectedEOF, StartMax},
		{"small body as announced", 10, "0123456789", nil, 11},
		{"body larger than the first buffer", 300 << 10, strings.Repeat("x", 300<<10), nil, 300<<10 + 1},
		{"body of exactly the first buffer", StartMax - 1, strings.Repeat("x", StartMax-1), nil, StartMax},
		{"no announcement", 0, "chunked body", nil, 512},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Read in small pieces, as bytes arrive from the network.
			var r io.Reader = bytes.NewReader([]byte(tc.body))
			if tc.err != nil {
				r = io.MultiReader(r, iotest.ErrReader(tc.err))
			}
			got, err := ReadAll(iotest.HalfReader(r), tc.announced, -1)
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if string(got) != tc.body {
				t.Errorf("read %d bytes, want %d", len(got), len(tc.body))
			}
			if cap(got) > tc.maxCap {
				t.Errorf("buffer of %d bytes for a body of %d announced as %d, want at most %d", cap(got), len(got), tc.announced, tc.maxCap)
			}
		})
	}
}

// TestLimit holds ReadAll with a limit to io.ReadAll(io.LimitReader(r,
// limit+1)), whatever the announced length says, in one read or byte by
// byte; and without one to io.ReadAll.
func TestLimit(t *testing.T) {
	const limit = 8
	for _, tt := range []struct {
		name      string
		body      string
		announced int64
	}{
		{"announced", "12345", 5},
		{"not announced", "12345", -1},
		{"empty", "", 0},
		{"at the limit", "12345678", 8},
		{"past the limit, announced", "123456789abc", 12},
		{"past the limit, not announced", "123456789abc", -1},
		{"longer than announced", "1234567", 3},
		{"longer than announced, past the limit", "123456789abc", 3},
		{"shorter than announced", "12", 5},
	} {
		for _, oneByte := range []bool{false, true} {
			reader := func() io.Reader {
				if oneByte {
					return iotest.OneByteReader(strings.NewReader(tt.body))
				}
				return strings.NewReader(tt.body)
			}
			want, _ := io.ReadAll(io.LimitReader(reader(), limit+1))
			got, err := ReadAll(reader(), tt.announced, limit)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s (one byte %v), limit %d: %q, %v; want %q", tt.name, oneByte, limit, got, err, want)
			}
			got, err = ReadAll(reader(), tt.announced, -1)
			if err != nil || got == nil && tt.body != "" || string(got) != tt.body {
				t.Errorf("%s (one byte %v), no limit: %q, %v; want %q", tt.name, oneByte, got, err, tt.body)
			}
		}
	}
	boom := errors.New("boom")
	if _, err := ReadAll(iotest.ErrReader(boom), 5, limit); !errors.Is(err, boom) {
		t.Errorf("a failed read: %v, want %v", err, boom)
	}
}

// TestOneAllocation: a body read as announced takes one allocation, the
// buffer.
func TestOneAllocation(t *testing.T) {
	body := strings.Repeat("x", 600)
	r := strings.NewReader(body)
	if got := testing.AllocsPerRun(100, func() {
		r.Reset(body)
		if b, err := ReadAll(r, int64(len(body)), 1<<20); err != nil || len(b) != len(body) {
			t.Fatalf("%d bytes, %v", len(b), err)
		}
	}); got != 1 {
		t.Errorf("%v allocations, want 1", got)
	}
}
