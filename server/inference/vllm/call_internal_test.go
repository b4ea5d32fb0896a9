package vllm

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadAtMost holds readAtMost to what it replaces,
// io.ReadAll(io.LimitReader(r, limit+1)), whatever the announced length
// says, in one read or byte by byte.
func TestReadAtMost(t *testing.T) {
	const limit = 8
	tests := []struct {
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
	}
	for _, tt := range tests {
		for _, oneByte := range []bool{false, true} {
			reader := func() io.Reader {
				if oneByte {
					return iotest.OneByteReader(strings.NewReader(tt.body))
				}
				return strings.NewReader(tt.body)
			}
			want, _ := io.ReadAll(io.LimitReader(reader(), limit+1))
			got, err := readAtMost(reader(), tt.announced, limit)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s (one byte %v): %q, %v; want %q", tt.name, oneByte, got, err, want)
			}
		}
	}
	boom := errors.New("boom")
	if _, err := readAtMost(iotest.ErrReader(boom), 5, limit); !errors.Is(err, boom) {
		t.Errorf("a failed read: %v, want %v", err, boom)
	}
}
