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

// LeavesExpire returns when the leaves of a day's tree pass a retention of
// days whole days: that many days after the day ended.
func LeavesExpire(day string, days int) (time.Time, error) {
	end, err := ids.DayEnd(day)
	if err != nil {
		return time.Time{}, fmt.Errorf("store: %w", err)
	}
	return end.AddDate(0, 0, days), nil
}
