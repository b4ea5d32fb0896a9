package edge

import (
	"errors"
	"net/http"
	"strings"

	"github.com/tollgate-dev/tollgate/server/keys"
)

// Authenticator resolves a bearer secret; it returns keys.ErrUnauthorized
// for a missing, unknown, expired or revoked key.
type Authenticator interface {
	Authenticate(secret string) (*keys.Principal, error)
}

// authenticate resolves the request's one `Authorization: Bearer <secret>`.
// Every way of failing is keys.ErrUnauthorized except an Authenticator
// failing for another reason, which is passed on.
func (s *Server) authenticate(r *http.Request) (*keys.Principal, error) {
	// More than one Authorization header is ambiguous: which key would
	// the request be charged to? Refused, not resolved by order.
	auth := r.Header["Authorization"]
	if len(auth) != 1 {
		return nil, keys.ErrUnauthorized
	}
	scheme, secret, ok := strings.Cut(auth[0], " ")
	secret = strings.TrimSpace(secret)
	if !ok || !strings.EqualFold(scheme, "Bearer") || secret == "" {
		return nil, keys.ErrUnauthorized
	}
	p, err := s.cfg.Auth.Authenticate(secret)
	if err == nil && p == nil {
		err = keys.ErrUnauthorized
	}
	return p, err
}

// refuseUnauthenticated answers a request that authenticate refused: 401
// for a bad key, 500 when the Authenticator itself failed. Neither is
// audited: the request belongs to no tenant's tree, so a security log line
// and a metric stand in for the audit event.
func (s *Server) refuseUnauthenticated(w http.ResponseWriter, r *http.Request, requestID string, err error) {
	if !errors.Is(err, keys.ErrUnauthorized) {
		s.log.Error("authenticator failed", "request_id", requestID, "err", err)
		writeError(w, requestID, internalError())
		return
	}
	s.log.Warn("unauthenticated request", "request_id", requestID, "path", r.URL.Path, "remote", r.RemoteAddr)
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.Unauthenticated.Inc()
	}
	writeError(w, requestID, unauthorized())
}

// reauthenticate looks the request's key up again once its body is in,
// and from then on serves the request under what the key is now. A body
// may take up to BodyReadTimeout to arrive: a key revoked or expired
// meanwhile must not be served, and one whose limits were lowered must
// not be admitted under its old ones. A refusal is 401 and, the request
// having been authenticated, an audit event of the key as it was.
func (s *Server) reauthenticate(w http.ResponseWriter, r *http.Request, rc *requestContext) bool {
	p, err := s.authenticate(r)
	switch {
	case err == nil:
		rc.principal = p
		return true
	case errors.Is(err, keys.ErrUnauthorized):
		s.log.Warn("key revoked or expired while its request was read", "request_id", rc.id, "key_id", rc.principal.KeyID)
		s.respondError(w, r, rc, unauthorized())
	default:
		s.log.Error("authenticator failed", "request_id", rc.id, "err", err)
		s.respondError(w, r, rc, internalError())
	}
	return false
}
