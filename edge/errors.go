package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"

	"github.com/tollgate-dev/tollgate/internal/openai"
	"github.com/tollgate-dev/tollgate/server/pipeline"
)

// Error codes of the envelope (spec: Errors) and the OpenAI error types they
// travel with.
const (
	codeInvalidRequest   = pipeline.CodeInvalidRequest
	codeNotFound         = pipeline.CodeNotFound
	codeMethodNotAllowed = "method_not_allowed"
	codeTooLarge         = "request_too_large"
	codeRequestTimeout   = "request_timeout"
	codeUnsupportedMedia = "unsupported_media_type"
	codeInternal         = pipeline.CodeInternal
	codeUnavailable      = pipeline.CodeUnavailable

	typeInvalidRequest = "invalid_request_error"
	typeAuthentication = "authentication_error"
	typePolicy         = "policy"
	typeRateLimit      = "rate_limit_error"
	typeServer         = "server_error"
)

// apiError is an error the client is told about: the spec's error object
// and the HTTP status it is sent with.
type apiError struct {
	Status int
	openai.APIError
}

func newAPIError(status int, code, typ, message string) *apiError {
	return &apiError{Status: status, APIError: openai.APIError{Code: code, Type: typ, Message: message}}
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

// envelope is e as the body of a reply or the event of a stream.
func (e *apiError) envelope() openai.ErrorResponse { return openai.ErrorResponse{Error: &e.APIError} }

func invalid(param, format string, args ...any) *apiError {
	e := newAPIError(http.StatusBadRequest, codeInvalidRequest, typeInvalidRequest, fmt.Sprintf(format, args...))
	e.Param = param
	return e
}

func notFound(format string, args ...any) *apiError {
	return newAPIError(http.StatusNotFound, codeNotFound, typeInvalidRequest, fmt.Sprintf(format, args...))
}

func internalError() *apiError {
	return newAPIError(http.StatusInternalServerError, codeInternal, typeServer, "internal error; retry with backoff")
}

// errorTypes are the OpenAI error types each kind of the pipeline's
// errors travels with.
var errorTypes = map[pipeline.Kind]string{
	pipeline.KindInternal:          typeServer,
	pipeline.KindInvalid:           typeInvalidRequest,
	pipeline.KindUnauthorized:      typeAuthentication,
	pipeline.KindPolicyDenied:      typePolicy,
	pipeline.KindNotFound:          typeInvalidRequest,
	pipeline.KindRateLimited:       typeRateLimit,
	pipeline.KindLimitsUnavailable: typeServer,
	pipeline.KindModelUnavailable:  typeServer,
	pipeline.KindUnavailable:       typeServer,
}

// fromPipeline is what the client is told of the pipeline's refusal or
// failure, in the spec's envelope.
func fromPipeline(e *pipeline.Error) *apiError {
	a := newAPIError(e.Kind.Status(), e.Kind.Code(), errorTypes[e.Kind], e.Message)
	a.Param, a.PolicyDecisionID = e.Param, e.DecisionID
	if e.Kind == pipeline.KindInvalid && e.Param == "" {
		if param, msg, ok := publicViolation(e.Message); ok {
			a.Param, a.Message = param, msg
		}
	}
	return a
}

// violationRe is the first violation of a protovalidate error, as an
// engine's InvalidArgument relays it: its field path and what is wrong.
var violationRe = regexp.MustCompile(`^validation errors?:(?:\n - | )([a-z_]+(?:\[\d+\])?(?:\.[a-z_]+(?:\[\d+\])?)*): (.*)`)

// publicPaths name the inference API's fields as the OpenAI request a
// client sent names them.
var publicPaths = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`^messages\[(\d+)\]\.parts\.parts\[(\d+)\]\.text$`), "messages[$1].content[$2].text"},
	{regexp.MustCompile(`^messages\[(\d+)\]\.parts\.parts$`), "messages[$1].content"},
	{regexp.MustCompile(`^messages\[(\d+)\]\.text$`), "messages[$1].content"},
	{regexp.MustCompile(`^messages\[(\d+)\]\.tool_calls\[(\d+)\]\.(name|arguments)$`), "messages[$1].tool_calls[$2].function.$3"},
	{regexp.MustCompile(`^tools\[(\d+)\]\.(name|description)$`), "tools[$1].function.$2"},
	{regexp.MustCompile(`^tools\[(\d+)\]\.parameters_json$`), "tools[$1].function.parameters"},
	{regexp.MustCompile(`^inputs\[(\d+)\]\.(text|tokens\.ids)$`), "input[$1]"},
	{regexp.MustCompile(`^inputs$`), "input"},
	{regexp.MustCompile(`^chat_template_kwargs_json$`), "chat_template_kwargs"},
}

// publicViolation rewrites an inference API's validation error (which
// names its own fields: messages[0].text, inputs[0].text) in the words of
// the client's request, with the field as param. The edge checks the
// bounds it knows when it decodes; this keeps any other from reaching a
// client in internal words. ok is false for another message, or a field
// with no public name known.
func publicViolation(msg string) (param, message string, ok bool) {
	m := violationRe.FindStringSubmatch(msg)
	if m == nil {
		return "", "", false
	}
	for _, p := range publicPaths {
		if p.re.MatchString(m[1]) {
			param = p.re.ReplaceAllString(m[1], p.repl)
			return param, param + ": " + m[2], true
		}
	}
	return "", "", false
}

// writeError writes e in the spec's envelope, outside the audited path: for
// requests that belong to no tenant (no route, wrong method, no valid key).
func writeError(w http.ResponseWriter, requestID string, e *apiError) {
	e.RequestID = requestID
	body, _ := json.Marshal(e.envelope())
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

func unavailable() *apiError { return fromPipeline(pipeline.ShuttingDown()) }

// clientGone reports whether the request's context has ended, and if so
// finishes the request here, before any response, with the token
// reservation returned in full (nothing reached the client). A request
// cancelled by the gateway's shutdown (ErrShuttingDown, asked first) is
// answered 503 service_unavailable and recorded with it. Otherwise the
// client has disconnected, or half-closed its connection: the event is
// recorded with status 499, nothing is written or logged as an error, and
// the connection is aborted (abort), so it does not return. Every step that fails while
// the client waits asks this first, so that neither a disconnect nor a
// shutdown is reported as the step's own failure.
func (s *Server) clientGone(w http.ResponseWriter, r *http.Request, rc *requestContext) bool {
	if r.Context().Err() == nil {
		return false
	}
	if shuttingDown(r) {
		rc.call.Settle(0)
		s.respondError(w, r, rc, unavailable())
		return true
	}
	rc.call.Abandon(r.Context())
	s.count(rc, pipeline.StatusClientClosed)
	abort()
	return true
}

// abort ends the request's connection without a response, or without the
// rest of one already started: net/http would otherwise answer a handler
// that wrote nothing with 200 OK and an empty body, and end a stream cut
// short as if it were complete. A client that half-closes its connection
// once its request is sent still reads what is written to it, and its
// request's context is cancelled as for one that went away (net/http sees
// the EOF); it must not be told its request succeeded.
func abort() { panic(http.ErrAbortHandler) }

// refuse answers a step of the pipeline that refused the request or
// failed, before any of the reply was sent: the token reservation is
// returned in full. A client that went away meanwhile (or a shutdown) is
// finished by clientGone instead, except after a policy denial, which is
// answered whatever happened to the connection. A refusal by the limits
// carries Retry-After and the x-ratelimit-* headers; one that a retry
// cannot cure (pipeline.Error.NoRetry) x-should-retry: false.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, rc *requestContext, err error) {
	e := pipeline.AsError(err)
	if e.Kind != pipeline.KindPolicyDenied && s.clientGone(w, r, rc) {
		return
	}
	rc.call.Settle(0)
	if e.Denied != nil {
		e.Denied.SetHeaders(w.Header())
		rc.limitHeaders = true
	}
	if pipeline.IsAuditFull(e.Cause) {
		w.Header().Set("Retry-After", pipeline.AuditFullRetryAfter)
	}
	if e.NoRetry {
		// The official SDKs retry 429 and 5xx unless told not to.
		w.Header().Set("x-should-retry", "false")
	}
	if e.Kind == pipeline.KindInternal && !e.Logged {
		s.log.Warn("internal call failed", "request_id", rc.id, "err", err)
	}
	s.respondError(w, r, rc, fromPipeline(e))
}
