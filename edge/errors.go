package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error codes of the envelope (spec: Errors) and the OpenAI error types they
// travel with.
const (
	codeInvalidRequest    = "invalid_request"
	codeUnauthorized      = "unauthorized"
	codePolicyDenied      = "policy_denied"
	codeNotFound          = "not_found"
	codeMethodNotAllowed  = "method_not_allowed"
	codeTooLarge          = "request_too_large"
	codeRequestTimeout    = "request_timeout"
	codeUnsupportedMedia  = "unsupported_media_type"
	codeRateLimited       = "rate_limited"
	codeInternal          = "internal_error"
	codeModelUnavailable  = "model_unavailable"
	codeLimitsUnavailable = "limits_unavailable"
	codeUnavailable       = "service_unavailable"

	typeInvalidRequest = "invalid_request_error"
	typeAuthentication = "authentication_error"
	typePolicy         = "policy"
	typeRateLimit      = "rate_limit_error"
	typeServer         = "server_error"
)

// apiError is an error the client is told about, in the spec's envelope.
type apiError struct {
	Status           int    `json:"-"`
	Code             string `json:"code"`
	Message          string `json:"message"`
	Type             string `json:"type"`
	RequestID        string `json:"request_id"`
	Param            string `json:"param,omitempty"`
	PolicyDecisionID string `json:"policy_decision_id,omitempty"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func invalid(param, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: codeInvalidRequest, Type: typeInvalidRequest, Param: param, Message: fmt.Sprintf(format, args...)}
}

func unauthorized() *apiError {
	return &apiError{Status: http.StatusUnauthorized, Code: codeUnauthorized, Type: typeAuthentication,
		Message: "missing, expired or revoked virtual key; send it as Authorization: Bearer <key>"}
}

func policyDenied(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusForbidden, Code: codePolicyDenied, Type: typePolicy, Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusNotFound, Code: codeNotFound, Type: typeInvalidRequest, Message: fmt.Sprintf(format, args...)}
}

func internalError() *apiError {
	return &apiError{Status: http.StatusInternalServerError, Code: codeInternal, Type: typeServer,
		Message: "internal error; retry with backoff"}
}

// fromRPC maps an error of an internal gRPC call to what the client sees.
// A Canceled call is an internal error like any other: whether the client
// has gone is decided from the request's context (clientGone), not from
// the code, since an engine may end a call as cancelled for reasons of
// its own while the client still waits.
func fromRPC(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.InvalidArgument:
		return &apiError{Status: http.StatusBadRequest, Code: codeInvalidRequest, Type: typeInvalidRequest, Message: st.Message()}
	case codes.NotFound, codes.Unavailable:
		return &apiError{Status: http.StatusServiceUnavailable, Code: codeModelUnavailable, Type: typeServer, Message: st.Message()}
	}
	return internalError()
}

// writeError writes e in the spec's envelope, outside the audited path: for
// requests that belong to no tenant (no route, wrong method, no valid key).
func writeError(w http.ResponseWriter, requestID string, e *apiError) {
	e.RequestID = requestID
	body, _ := json.Marshal(errorEnvelope{Error: e})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
}

// ErrShuttingDown is the cause with which the server running the edge
// cancels the requests still in flight when its shutdown grace is over
// (an http.Server whose BaseContext was made by context.WithCancelCause).
// The edge answers such a request 503 service_unavailable (one error event
// if its stream had started) and records it, instead of taking the
// cancellation for a client that went away.
var ErrShuttingDown = errors.New("the gateway is shutting down")

// shuttingDown reports whether the request was cancelled by the gateway's
// shutdown (ErrShuttingDown) rather than by its client.
func shuttingDown(r *http.Request) bool {
	return errors.Is(context.Cause(r.Context()), ErrShuttingDown)
}

func unavailable() *apiError {
	return &apiError{Status: http.StatusServiceUnavailable, Code: codeUnavailable, Type: typeServer,
		Message: "the gateway is shutting down; retry on another gateway or later"}
}

// statusClientClosed is recorded for a request whose client disconnected
// before any response was written (nginx's 499).
const statusClientClosed = 499

// clientGone reports whether the request's context has ended, and if so
// finishes the request here, before any response, with the token
// reservation returned in full (nothing reached the client). A request
// cancelled by the gateway's shutdown (ErrShuttingDown, asked first) is
// answered 503 service_unavailable and recorded with it. Otherwise the
// client has disconnected: the event is recorded with status 499, and
// nothing is written or logged as an error. Every step that fails while
// the client waits asks this first, so that neither a disconnect nor a
// shutdown is reported as the step's own failure.
func (s *Server) clientGone(w http.ResponseWriter, r *http.Request, rc *requestContext) bool {
	if r.Context().Err() == nil {
		return false
	}
	s.settle(rc, 0)
	if shuttingDown(r) {
		s.respondError(w, r, rc, unavailable())
		return true
	}
	_ = s.record(r.Context(), rc, statusClientClosed, nil)
	s.count(rc, statusClientClosed)
	return true
}

// fail reports an internal call's error to the client, logging what the
// client is not told. It comes before any of the reply was sent, so the
// token reservation is returned in full.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, rc *requestContext, what string, err error) {
	if s.clientGone(w, r, rc) {
		return
	}
	s.settle(rc, 0) // nothing reached the client: nothing is charged
	e := fromRPC(err)
	if e.Code == codeInternal && !loggedByFilter(err) {
		s.log.Warn("internal call failed", "op", what, "request_id", rc.id, "err", err)
	}
	s.respondError(w, r, rc, e)
}
