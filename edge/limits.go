package edge

import (
	"context"
	"errors"
	"math"
	"net/http"

	"github.com/tollgate-dev/tollgate/server/keys"
	"github.com/tollgate-dev/tollgate/server/limits"
)

// DefaultCompletionReserve is the completion tokens reserved against a key's
// TPD budget when a chat request sets no max_tokens, and then the engine's
// max_tokens, so that the reply stays within it; the difference to the
// real usage is returned when the request ends (docs/limits.md).
const DefaultCompletionReserve = 4096

// Limiter admits requests against a key's RPM and TPD (server/limits).
type Limiter interface {
	Admit(ctx context.Context, p *keys.Principal, reserve int64) (limits.Reservation, error)
	Peek(p *keys.Principal) limits.State
}

// admit charges the request to the key's limits, reserving reserve tokens.
// A refusal is answered here: 429 rate_limited with Retry-After, or 503
// when the limits cannot be checked; a client that went away while the
// limits waited (on etcd, say) is recorded as 499 instead.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, rc *requestContext, reserve int64) bool {
	if s.cfg.Limits == nil {
		return true
	}
	res, err := s.cfg.Limits.Admit(r.Context(), rc.principal, reserve)
	if err != nil && s.clientGone(w, r, rc) {
		return false
	}
	var denied *limits.Denied
	switch {
	case err == nil:
		rc.reservation = res
		res.State().SetHeaders(w.Header())
		rc.limitHeaders = true
		return true
	case errors.As(err, &denied):
		denied.SetHeaders(w.Header())
		rc.limitHeaders = true
		s.respondError(w, r, rc, &apiError{Status: http.StatusTooManyRequests, Code: codeRateLimited, Type: typeRateLimit, Message: denied.Error()})
	case errors.Is(err, limits.ErrUnavailable):
		s.log.Warn("limits unavailable", "request_id", rc.id, "err", err)
		s.respondError(w, r, rc, &apiError{Status: http.StatusServiceUnavailable, Code: codeLimitsUnavailable, Type: typeServer,
			Message: "the key's limits cannot be checked right now; retry with backoff"})
	default: // a caller's bug, such as a negative reservation
		s.log.Error("limits admission failed", "request_id", rc.id, "err", err)
		s.respondError(w, r, rc, internalError())
	}
	return false
}

// settle returns the unused part of the request's token reservation.
func (s *Server) settle(rc *requestContext, used int64) {
	rc.reservation.Settle(used)
	rc.reservation = limits.Reservation{}
}

// limitHeaders sets the x-ratelimit-* headers on a response that was not
// admitted (a bad request, a policy denial), so every response of a limited
// key carries them.
func (s *Server) limitHeaders(w http.ResponseWriter, rc *requestContext) {
	if s.cfg.Limits == nil || rc.principal == nil || rc.limitHeaders {
		return
	}
	s.cfg.Limits.Peek(rc.principal).SetHeaders(w.Header())
}

// addTokens adds two token counts, saturating at the int64 limits instead
// of wrapping: a sum too large for an int64 stays too large.
func addTokens(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}
