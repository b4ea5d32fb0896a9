package limits

import (
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate-dev/tollgate/server/keys"
)

// State is a key's limit state as one gateway sees it, for the OpenAI
// x-ratelimit-* headers. Remaining is what the window's counter had not
// granted when this gateway last saw it, plus what this gateway holds: it
// goes down with every admission here, and catches up with other
// gateways' admissions at this gateway's next grant.
type State struct {
	LimitRequests     int64
	RemainingRequests int64
	ResetRequests     time.Duration
	LimitTokens       int64
	RemainingTokens   int64
	ResetTokens       time.Duration
}

// snapshot reads the state. ks.mu is held.
func (l *Limiter) snapshot(ks *keyState, p *keys.Principal, now time.Time) State {
	s := State{LimitRequests: p.RPM, LimitTokens: p.TPD}
	if p.RPM > 0 {
		s.RemainingRequests = min(max(0, p.RPM-ks.rpm.ref.val+ks.rpm.local+ks.rpm.returning), p.RPM)
		s.ResetRequests = ks.rpm.ref.end.Sub(now)
	}
	if p.TPD > 0 {
		s.RemainingTokens = min(max(0, p.TPD-ks.tpd.ref.val+ks.tpd.local+ks.tpd.returning), p.TPD)
		s.ResetTokens = ks.tpd.ref.end.Sub(now)
	}
	return s
}

// Peek returns key p's state on this gateway without admitting anything,
// for the headers of responses that were not admitted (bad requests,
// policy denials). It does not touch etcd.
func (l *Limiter) Peek(p *keys.Principal) State {
	if p.RPM <= 0 && p.TPD <= 0 {
		return State{}
	}
	ks, now := l.lockState(p)
	defer ks.mu.Unlock()
	return l.snapshot(ks, p, now)
}

// SetHeaders writes the x-ratelimit-* headers: the requests trio when the
// key has an RPM limit, the tokens trio when it has a TPD limit. Resets
// are durations rounded up to the second ("1s", "6m0s"). The names are in
// net/http's canonical form and the values share one array: every
// admitted response carries them, and Header.Set would allocate the
// canonical name and a slice for each.
func (s State) SetHeaders(h http.Header) {
	var vals []string
	switch {
	case s.LimitRequests > 0 && s.LimitTokens > 0:
		vals = make([]string, 6)
	case s.LimitRequests > 0 || s.LimitTokens > 0:
		vals = make([]string, 3)
	default:
		return
	}
	if s.LimitRequests > 0 {
		vals[0], vals[1], vals[2] = strconv.FormatInt(s.LimitRequests, 10), strconv.FormatInt(s.RemainingRequests, 10),
			formatReset(s.ResetRequests)
		h["X-Ratelimit-Limit-Requests"] = vals[0:1:1]
		h["X-Ratelimit-Remaining-Requests"] = vals[1:2:2]
		h["X-Ratelimit-Reset-Requests"] = vals[2:3:3]
		vals = vals[3:]
	}
	if s.LimitTokens > 0 {
		vals[0], vals[1], vals[2] = strconv.FormatInt(s.LimitTokens, 10), strconv.FormatInt(s.RemainingTokens, 10),
			formatReset(s.ResetTokens)
		h["X-Ratelimit-Limit-Tokens"] = vals[0:1:1]
		h["X-Ratelimit-Remaining-Tokens"] = vals[1:2:2]
		h["X-Ratelimit-Reset-Tokens"] = vals[2:3:3]
	}
}

// formatReset renders d rounded up to whole seconds, as OpenAI does.
func formatReset(d time.Duration) string { return ceilSecond(d).String() }

func ceilSecond(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return (d + time.Second - 1).Truncate(time.Second)
}
