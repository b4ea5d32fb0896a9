package edge

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readAll sizes its buffer from Content-Length only up to bodyBufStart: a
// client that announces a large body and sends little (or nothing, for as
// long as the body may take) holds little memory. The buffer grows with
// what arrives, never past the announced size (plus the byte that sees
// EOF), and a read that fails keeps what had arrived.
func TestReadAllBuffer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		announced int64
		body      string
		err       error // the reader's, after body
		// maxCap bounds the buffer's capacity once the body is read.
		maxCap int
	}{
		{"short body under a large announcement", 8 << 20, "hello", nil, bodyBufStart},
		{"nothing under a large announcement", 8 << 20, "", nil, bodyBufStart},
		{"body cut short under a large announcement", 8 << 20, "part", io.ErrUnexpectedEOF, bodyBufStart},
		{"small body as announced", 10, "0123456789", nil, 11},
		{"body larger than the first buffer", 300 << 10, strings.Repeat("x", 300<<10), nil, 300<<10 + 1},
		{"body of exactly the first buffer", bodyBufStart - 1, strings.Repeat("x", bodyBufStart-1), nil, bodyBufStart},
		{"no announcement", 0, "chunked body", nil, 512},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Read in small pieces, as bytes arrive from the network.
			var r io.Reader = bytes.NewReader([]byte(tc.body))
			if tc.err != nil {
				r = io.MultiReader(r, iotest.ErrReader(tc.err))
			}
			got, err := readAll(iotest.HalfReader(r), tc.announced)
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
