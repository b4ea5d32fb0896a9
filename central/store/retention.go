package store

import (
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/internal/ids"
)

// HeadsExpire returns when the heads of a day's trees pass
// HeadRetentionYears: that many years after the day ended.
func HeadsExpire(day string) (time.Time, error) {
	end, err := ids.DayEnd(day)
	if err != nil {
		return time.Time{}, fmt.Errorf("store: %w", err)
	}
	return end.AddDate(HeadRetentionYears, 0, 0), nil
}

// LeavesKeptDays is the leaf retention, in whole days after the day ends,
// that keeps a day's leaves exactly as long as its heads: the central
// plane keeps every tree's leaves, nodes and request index until its
// heads expire (LeavesExpire(day, LeavesKeptDays(day)) is
// HeadsExpire(day)), so that an event's proof outlives its bodies.
func LeavesKeptDays(day string) (int, error) {
	end, err := ids.DayEnd(day)
	if err != nil {
		return 0, fmt.Errorf("store: %w", err)
	}
	return int(end.AddDate(HeadRetentionYears, 0, 0).Sub(end) / (24 * time.Hour)), nil
}

// LeavesExpire returns when the leaves of a day's tree pass a retention of
// days whole days: that many days after the day ended.
func LeavesExpire(day string, days int) (time.Time, error) {
	end, err := ids.DayEnd(day)
	if err != nil {
		return time.Time{}, fmt.Errorf("store: %w", err)
	}
	return end.AddDate(0, 0, days), nil
}
