package ids

import (
	"strings"
	"testing"
	"time"
)

// TestRequestIDsSortByTime: an id made a millisecond later sorts after,
// whatever its random part, and the time part reads back.
func TestRequestIDsSortByTime(t *testing.T) {
	base := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	prev := ""
	for i := range 2000 {
		id := RequestAt(base.Add(time.Duration(i) * time.Millisecond))
		if len(id) != 30 || !strings.HasPrefix(id, "req_") || strings.Trim(id[4:], idAlphabet) != "" {
			t.Fatalf("malformed id %q", id)
		}
		if id <= prev {
			t.Fatalf("%q made after %q sorts before it", id, prev)
		}
		prev = id
		var ms int64
		for _, c := range id[4:14] {
			ms = ms<<5 | int64(strings.IndexRune(idAlphabet, c))
		}
		if want := base.Add(time.Duration(i) * time.Millisecond).UnixMilli(); ms != want {
			t.Fatalf("time part %d, want %d", ms, want)
		}
	}
	if a, b := RequestAt(base), RequestAt(base); a == b || a[:14] != b[:14] {
		t.Fatalf("same millisecond: %q %q", a, b)
	}
}
