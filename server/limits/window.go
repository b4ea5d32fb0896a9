package limits

import (
	"strconv"
	"time"
)

// kind is what a counter counts.
type kind uint8

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

// window returns the bounds of the window of kind k holding t and its name
// in etcd keys: the Unix second of the minute's start for RPM, the date
// for TPD.
func window(k kind, t time.Time) (start, end time.Time, name string) {
	t = t.UTC()
	if k == rpm {
		start = t.Truncate(time.Minute)
		return start, start.Add(time.Minute), strconv.FormatInt(start.Unix(), 10)
	}
	start = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	return start, start.AddDate(0, 0, 1), start.Format(time.DateOnly)
}

// keyPrefix is where a key's counters live, next to its record under
// /tollgate/keys/.
func keyPrefix(tenantID, keyID string) string {
	return "/tollgate/limits/" + tenantID + "/" + keyID + "/"
}

// counterKey is the etcd key of one window's counter.
func counterKey(tenantID, keyID string, k kind, windowName string) string {
	return keyPrefix(tenantID, keyID) + k.String() + "/" + windowName
}

// probeKey is read to check that etcd answers.
const probeKey = "/tollgate/limits/"
