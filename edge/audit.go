package edge

import (
	"context"
	"net/http"

	auditlog "github.com/tollgate-dev/tollgate/audit/log"
)

// Recorder durably records a request's audit event (audit/log.Log). Append
// returns once the event is on disk. The edge appends every authenticated
// request's event before the final byte of its response (the body, or a
// stream's [DONE]) reaches the client.
type Recorder interface {
	Append(ctx context.Context, ev auditlog.Event) (auditlog.Receipt, error)
}

// record appends the request's audit event. Requests without an
// authenticated key are not part of any tenant's tree and are not recorded.
// The append outlives a disconnected client: the event is written whatever
// happened to the connection.
func (s *Server) record(ctx context.Context, rc *requestContext, status int, response []byte) error {
	if s.cfg.Audit == nil || rc.principal == nil {
		return nil
	}
	_, err := s.cfg.Audit.Append(context.WithoutCancel(ctx), auditlog.Event{
		RequestID:        rc.id,
		TenantID:         rc.principal.TenantID,
		KeyID:            rc.principal.KeyID,
		Time:             rc.received,
		Endpoint:         rc.endpoint,
		Model:            rc.model,
		Status:           status,
		PromptTokens:     rc.promptTokens,
		CompletionTokens: rc.completionTokens,
		PolicyDecisionID: rc.decisionID,
		RequestBody:      rc.body,
		ResponseBody:     response,
	})
	if err != nil {
		s.log.Error("audit append failed; the response is withheld", "request_id", rc.id, "err", err)
	}
	return err
}

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
	err := s.record(r.Context(), rc, status, body)
	if used != nil {
		if err != nil {
			s.settle(rc, 0)
		} else {
			s.settle(rc, *used)
		}
	}
	if err != nil {
		e := internalError()
		e.RequestID = rc.id
		status, body = e.Status, mustMarshal(errorEnvelope{Error: e})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// A client that stops reading fails the write past the stall bound;
	// its event is already recorded.
	_ = rc.out.write(body)
	s.count(rc, status)
}

// respondError sends e in the spec's envelope, audited like any response.
func (s *Server) respondError(w http.ResponseWriter, r *http.Request, rc *requestContext, e *apiError) {
	e.RequestID = rc.id
	s.respond(w, r, rc, e.Status, mustMarshal(errorEnvelope{Error: e}))
}
