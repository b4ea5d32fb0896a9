package limits

import (
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate-dev/tollgate/server/keys"
)

// State is a key's limit state as one gateway sees it, for the OpenAI
// x-ratelimit-* headers. Remaining counts what the window's counter has not
// granted plus what this gateway holds: it goes down with every admission.
type State struct {
	LimitRequests     int64
	RemainingRequests int64
	ResetRequests     time.Duration
	LimitTokens       int64
	RemainingTokens   int64
	ResetTokens       time.Duration
}

// snapshot reads the state; ks.mu is held.
func (ks *keyState) snapshot(p *keys.Principal, now time.Time) State {
	s := State{LimitRequests: p.RPM, LimitTokens: p.TPD}
	if p.RPM > 0 {
		s.RemainingRequests = max(0, p.RPM-ks.rpm.ref.val+ks.rpm.local)
		s.ResetRequests = ks.rpm.ref.end.Sub(now)
	}
	if p.TPD > 0 {
		s.RemainingTokens = max(0, p.TPD-ks.tpd.ref.val+ks.tpd.local)
		s.ResetTokens = ks.tpd.ref.end.Sub(now)
	}
	return s
}

// SetHeaders writes the x-ratelimit-* headers: the requests trio when the
// key has an RPM limit, the tokens trio when it has a TPD limit.
func (s State) SetHeaders(h http.Header) {
	if s.LimitRequests > 0 {
		h.Set("x-ratelimit-limit-requests", strconv.FormatInt(s.LimitRequests, 10))
		h.Set("x-ratelimit-remaining-requests", strconv.FormatInt(s.RemainingRequests, 10))
		h.Set("x-ratelimit-reset-requests", formatReset(s.ResetRequests))
	}
	if s.LimitTokens > 0 {
		h.Set("x-ratelimit-limit-tokens", strconv.FormatInt(s.LimitTokens, 10))
		h.Set("x-ratelimit-remaining-tokens", strconv.FormatInt(s.RemainingTokens, 10))
		h.Set("x-ratelimit-reset-tokens", formatReset(s.ResetTokens))
	}
}

// formatReset rounds up to whole seconds, as OpenAI's "1s" or "6m0s".
func formatReset(d time.Duration) string {
	return ceilSecond(d).String()
}

func ceilSecond(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return (d + time.Second - 1).Truncate(time.Second)
}

// Denied is a request refused because the key's budget for the window is
// exhausted: 429 rate_limited with Retry-After.
type Denied struct {
	// Limit is "rpm" or "tpd".
	Limit      string
	RetryAfter time.Duration
	State      State
}

func (d *Denied) Error() string {
	if d.Limit == "rpm" {
		return "the key's requests-per-minute limit of " + strconv.FormatInt(d.State.LimitRequests, 10) + " is exhausted for this minute"
	}
	return "the key's tokens-per-day limit of " + strconv.FormatInt(d.State.LimitTokens, 10) + " does not cover this request's reservation today"
}

// SetHeaders writes the x-ratelimit-* headers and Retry-After (seconds).
func (d *Denied) SetHeaders(h http.Header) {
	d.State.SetHeaders(h)
	h.Set("Retry-After", strconv.FormatInt(int64(ceilSecond(d.RetryAfter)/time.Second), 10))
}

func (l *Limiter) denied(ks *keyState, p *keys.Principal, k kind, now time.Time) *Denied {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	d := &Denied{Limit: k.String(), State: ks.snapshot(p, now)}
	if k == rpm {
		d.RetryAfter = ks.rpm.ref.end.Sub(now)
	} else {
		d.RetryAfter = ks.tpd.ref.end.Sub(now)
	}
	return d
}

// Peek returns key p's state on this gateway without admitting anything,
// for the headers of responses that were not admitted (bad requests,
// policy denials).
func (l *Limiter) Peek(p *keys.Principal) State {
	if p.RPM <= 0 && p.TPD <= 0 {
		return State{}
	}
	ks := l.state(p)
	now := l.now()
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.roll(&ks.rpm, rpm, now)
	ks.roll(&ks.tpd, tpd, now)
	return ks.snapshot(p, now)
}
