package limits

import (
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate-dev/tollgate/server/keys"
)

// Reason names the limit that refused a request.
type Reason string

// The limits a request can be refused by.
const (
	ReasonRPM Reason = "rpm" // no request left in the key's UTC minute
	ReasonTPD Reason = "tpd" // the reservation does not fit in the key's UTC day
)

// Denied is a request refused because the key's budget for the window
// cannot cover it: 429 rate_limited with Retry-After. It was charged
// nothing.
type Denied struct {
	Reason Reason
	// RetryAfter is the time to the end of the window that refused.
	RetryAfter time.Duration
	State      State
}

func (d *Denied) Error() string {
	if d.Reason == ReasonRPM {
		return "the key's limit of " + strconv.FormatInt(d.State.LimitRequests, 10) + " requests per minute is used up for this minute"
	}
	return "the key's limit of " + strconv.FormatInt(d.State.LimitTokens, 10) + " tokens per day cannot cover this request's reservation today"
}

// SetHeaders writes the x-ratelimit-* headers and Retry-After in whole
// seconds, rounded up.
func (d *Denied) SetHeaders(h http.Header) {
	d.State.SetHeaders(h)
	h.Set("Retry-After", strconv.FormatInt(int64(ceilSecond(d.RetryAfter)/time.Second), 10))
}

// denied builds the refusal for the window of kind k. ks.mu is held.
func (l *Limiter) denied(ks *keyState, p *keys.Principal, k kind, now time.Time) *Denied {
	d := &Denied{Reason: ReasonTPD, State: l.snapshot(ks, p, now)}
	if k == rpm {
		d.Reason = ReasonRPM
	}
	d.RetryAfter = ks.bucket(k).ref.end.Sub(now)
	return d
}
