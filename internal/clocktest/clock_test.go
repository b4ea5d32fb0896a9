package clocktest

import (
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := New(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now = %v, want %v", got, start)
	}
	if got := c.Advance(90 * time.Second); !got.Equal(start.Add(90*time.Second)) || !c.Now().Equal(got) {
		t.Fatalf("Advance = %v, Now = %v", got, c.Now())
	}
	c.Advance(-time.Hour)
	if want := start.Add(90*time.Second - time.Hour); !c.Now().Equal(want) {
		t.Fatalf("after going back: %v, want %v", c.Now(), want)
	}
	c.Set(start)
	if !c.Now().Equal(start) {
		t.Fatalf("after Set: %v", c.Now())
	}
}
