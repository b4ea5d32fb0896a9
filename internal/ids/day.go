package ids

import (
	"fmt"
	"time"
)

// DayLayout is the format of a UTC day, YYYY-MM-DD.
const DayLayout = "2006-01-02"

// Day returns the UTC day of t, YYYY-MM-DD.
func Day(t time.Time) string { return t.UTC().Format(DayLayout) }

// ParseDay parses a UTC day and returns its first instant. It accepts only
// the canonical form, so that a day has one spelling in keys and heads.
func ParseDay(s string) (time.Time, error) {
	t, err := time.Parse(DayLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("ids: day %q: %w", s, err)
	}
	if t.Format(DayLayout) != s {
		return time.Time{}, fmt.Errorf("ids: day %q is not in canonical YYYY-MM-DD form", s)
	}
	return t, nil
}

// DayEnd returns the first instant after the UTC day s, that is the start of
// the next day.
func DayEnd(s string) (time.Time, error) {
	t, err := ParseDay(s)
	if err != nil {
		return time.Time{}, err
	}
	return t.AddDate(0, 0, 1), nil
}
