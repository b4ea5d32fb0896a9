package limits

import (
	"strconv"
	"time"
)

// kind is what a counter counts.
type kind int

const (
	rpm kind = iota // requests in a UTC minute
	tpd             // tokens in a UTC day
)

func (k kind) String() string {
	if k == rpm {
		return "rpm"
	}
	return "tpd"
}

// window returns the start of the window of kind k holding t, its end, and
// its name in etcd keys.
func window(k kind, t time.Time) (start, end time.Time, name string) {
	t = t.UTC()
	if k == rpm {
		start = t.Truncate(time.Minute)
		return start, start.Add(time.Minute), strconv.FormatInt(start.Unix(), 10)
	}
	start = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	return start, start.AddDate(0, 0, 1), start.Format(time.DateOnly)
}

func counterKey(tenantID, keyID string, k kind, windowName string) string {
	return "/tollgate/limits/" + tenantID + "/" + keyID + "/" + k.String() + "/" + windowName
}
