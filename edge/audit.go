package edge

import (
	"net/http"

	"github.com/tollgate-dev/tollgate/server/pipeline"
)

// respond sends a complete response once its audit event is durable. If
// the event cannot be recorded the client gets 500 instead of the result:
// no acknowledged request may be missing from the log.
func (s *Server) respond(w http.ResponseWriter, r *http.Request, rc *requestContext, status int, body []byte) {
	s.send(w, r, rc, status, body, nil)
}

// respondUsed is respond for a reply on which the engine spent used
// tokens: they are charged once its event is recorded, and nothing is
// when it could not be, since the client then gets 500, not the reply.
func (s *Server) respondUsed(w http.ResponseWriter, r *http.Request, rc *requestContext, used int64, body []byte) {
	s.send(w, r, rc, http.StatusOK, body, &used)
}

func (s *Server) send(w http.ResponseWriter, r *http.Request, rc *requestContext, status int, body []byte, used *int64) {
	s.limitHeaders(w, rc)
	if err := rc.call.Finish(r.Context(), status, body, used); err != nil {
		e := recordError(w, err)
		e.RequestID = rc.id
		status, body = e.Status, mustMarshal(e.envelope())
	} else {
		setReceipt(w, rc)
	}
	w.Header()["Content-Type"] = contentTypeJSON
	w.WriteHeader(status)
	// A client that stops reading fails the write past the stall bound;
	// its event is already recorded.
	_ = rc.out.write(body)
	s.count(rc, status)
}

// recordError is what a client is told instead of a reply whose event
// could not be recorded: 503 service_unavailable with Retry-After while
// the audit log's disk is full (a retry once space is freed succeeds),
// 500 otherwise. w is nil once the headers are sent (a stream).
func recordError(w http.ResponseWriter, err error) *apiError {
	if pipeline.IsAuditFull(err) {
		if w != nil {
			w.Header().Set("Retry-After", pipeline.AuditFullRetryAfter)
		}
		return newAPIError(http.StatusServiceUnavailable, codeUnavailable, typeServer, pipeline.AuditFullMessage)
	}
	return internalError()
}

// setReceipt sets the x-tollgate-receipt header of a reply whose event
// was recorded with a receipt.
func setReceipt(w http.ResponseWriter, rc *requestContext) {
	if v := rc.call.ReceiptHeaderValue(); v != "" {
		w.Header()[receiptHeaderKey] = []string{v}
	}
}

// The headers every recorded reply carries are set as canonical keys
// (Header.Set would canonicalise a lower-case name into a new string), the
// Content-Type to a value made once: nothing writes into a response's
// header values (net/http copies them when it sends the headers).
var (
	receiptHeaderKey = http.CanonicalHeaderKey(pipeline.ReceiptHeader)
	contentTypeJSON  = []string{"application/json"}
)

// respondError sends e in the spec's envelope, audited like any response.
func (s *Server) respondError(w http.ResponseWriter, r *http.Request, rc *requestContext, e *apiError) {
	e.RequestID = rc.id
	s.respond(w, r, rc, e.Status, mustMarshal(e.envelope()))
}
