package grpcserver

import (
	"testing"
	"time"
)

// TestGrace: 0 is the default grace, a negative value none, anything else
// itself.
func TestGrace(t *testing.T) {
	const def = 15 * time.Second
	for _, c := range []struct{ configured, want time.Duration }{
		{0, def},
		{-1, 0},
		{-time.Hour, 0},
		{time.Nanosecond, time.Nanosecond},
		{3 * time.Second, 3 * time.Second},
		{time.Hour, time.Hour},
	} {
		if got := Grace(c.configured, def); got != c.want {
			t.Errorf("Grace(%s, %s) = %s, want %s", c.configured, def, got, c.want)
		}
	}
}
