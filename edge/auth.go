package edge

import (
	"net/http"
	"strings"

	"github.com/tollgate-dev/tollgate/server/pipeline"
)

// bearerSecret is the request's one `Authorization: Bearer <secret>`, or ""
// when it has none, several, or another scheme: more than one
// Authorization header is ambiguous (which key would the request be
// charged to?) and is refused, not resolved by order.
func bearerSecret(r *http.Request) string {
	auth := r.Header["Authorization"]
	if len(auth) != 1 {
		return ""
	}
	scheme, secret, ok := strings.Cut(auth[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(secret)
}

// refuseUnauthenticated answers a request whose key the pipeline refused:
// 401 for a bad key, 500 when the Authenticator itself failed. Neither is
// audited: the request belongs to no tenant's tree, so a security log line
// and a metric stand in for the audit event.
func (s *Server) refuseUnauthenticated(w http.ResponseWriter, r *http.Request, requestID string, err error) {
	e := pipeline.AsError(err)
	if e.Kind != pipeline.KindUnauthorized {
		s.log.Error("authenticator failed", "request_id", requestID, "err", err)
		writeError(w, requestID, internalError())
		return
	}
	s.log.Warn("unauthenticated request", "request_id", requestID, "path", r.URL.Path, "remote", r.RemoteAddr)
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.Unauthenticated.Inc()
	}
	writeError(w, requestID, fromPipeline(e))
}

// reauthenticate looks the request's key up again once its body is in,
// and from then on serves the request under what the key is now
// (pipeline.Call.Reauthenticate). A refusal is 401 and, the request
// having been authenticated, an audit event of the key as it was.
func (s *Server) reauthenticate(w http.ResponseWriter, r *http.Request, rc *requestContext) bool {
	if err := rc.call.Reauthenticate(rc.secret); err != nil {
		s.respondError(w, r, rc, fromPipeline(pipeline.AsError(err)))
		return false
	}
	return true
}
