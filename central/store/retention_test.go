package store_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate/central/store"
)

// TestLeavesKeptAsLongAsHeads: the leaf retention ingest commits with
// keeps a day's leaves until its heads expire, to the second, leap days
// included, and no longer.
func TestLeavesKeptAsLongAsHeads(t *testing.T) {
	for _, c := range []struct {
		day  string
		days int
	}{
		// Ten years of 365 days, and a day for each February 29th between
		// the end of the day and the same date ten years later.
		{"2026-03-01", 3653}, // 2026-03-02 to 2036-03-02: 2028, 2032, 2036
		{"2016-02-29", 3652}, // 2016-03-01 to 2026-03-01: 2020, 2024
		{"2026-12-31", 3653}, // 2027-01-01 to 2037-01-01: 2028, 2032, 2036
		{"2027-03-01", 3653}, // 2027-03-02 to 2037-03-02: 2028, 2032, 2036
	} {
		days, err := store.LeavesKeptDays(c.day)
		if err != nil {
			t.Fatal(err)
		}
		leaves, _ := store.LeavesExpire(c.day, days)
		heads, _ := store.HeadsExpire(c.day)
		if !leaves.Equal(heads) {
			t.Errorf("%s: leaves kept %d days, until %s; the heads until %s", c.day, days, leaves, heads)
		}
		if days != c.days {
			t.Errorf("%s: %d days, want %d", c.day, days, c.days)
		}
	}
	if _, err := store.LeavesKeptDays("2026-02-30"); err == nil {
		t.Error("a day not in the calendar has a retention")
	}
}
