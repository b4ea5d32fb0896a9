package pipeline

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/server/keys"
	"github.com/tollgate-dev/tollgate/server/limits"
)

// Kind is what a refused or failed call is, as the spec's error table
// names it; each front tells it its own way (an HTTP status and the error
// envelope, a gRPC code and details).
type Kind int

const (
	// KindInternal: the gateway failed (500 internal_error).
	KindInternal Kind = iota
	// KindInvalid: the request is malformed (400 invalid_request).
	KindInvalid
	// KindUnauthorized: a missing, unknown, expired or revoked key (401).
	KindUnauthorized
	// KindPolicyDenied: the key's scopes or the bundle refused it (403,
	// with DecisionID).
	KindPolicyDenied
	// KindNotFound: what was asked for does not exist, or the key may not
	// see it (404 not_found).
	KindNotFound
	// KindRateLimited: the key's RPM or TPD (429, with Denied).
	KindRateLimited
	// KindLimitsUnavailable: the limits cannot be checked now (503).
	KindLimitsUnavailable
	// KindModelUnavailable: no engine serves the model now (503).
	KindModelUnavailable
	// KindUnavailable: the gateway cannot serve now, for example while it
	// shuts down (503 service_unavailable).
	KindUnavailable
)

// Spec error codes (error.code of the envelope; the reason of a gRPC
// status's ErrorInfo).
const (
	CodeInternal          = "internal_error"
	CodeInvalidRequest    = "invalid_request"
	CodeUnauthorized      = "unauthorized"
	CodePolicyDenied      = "policy_denied"
	CodeNotFound          = "not_found"
	CodeRateLimited       = "rate_limited"
	CodeLimitsUnavailable = "limits_unavailable"
	CodeModelUnavailable  = "model_unavailable"
	CodeUnavailable       = "service_unavailable"
)

var kinds = [...]struct {
	status int
	code   string
	grpc   codes.Code
}{
	KindInternal:          {http.StatusInternalServerError, CodeInternal, codes.Internal},
	KindInvalid:           {http.StatusBadRequest, CodeInvalidRequest, codes.InvalidArgument},
	KindUnauthorized:      {http.StatusUnauthorized, CodeUnauthorized, codes.Unauthenticated},
	KindPolicyDenied:      {http.StatusForbidden, CodePolicyDenied, codes.PermissionDenied},
	KindNotFound:          {http.StatusNotFound, CodeNotFound, codes.NotFound},
	KindRateLimited:       {http.StatusTooManyRequests, CodeRateLimited, codes.ResourceExhausted},
	KindLimitsUnavailable: {http.StatusServiceUnavailable, CodeLimitsUnavailable, codes.Unavailable},
	KindModelUnavailable:  {http.StatusServiceUnavailable, CodeModelUnavailable, codes.Unavailable},
	KindUnavailable:       {http.StatusServiceUnavailable, CodeUnavailable, codes.Unavailable},
}

// Status is the HTTP status the spec gives the kind; the audit event of a
// call refused with it records this status whatever the transport.
func (k Kind) Status() int { return kinds[k].status }

// Code is the spec's error code of the kind.
func (k Kind) Code() string { return kinds[k].code }

// GRPCCode is the gRPC status code of the kind.
func (k Kind) GRPCCode() codes.Code { return kinds[k].grpc }

// Error is a call refused or failed by a step of the pipeline.
type Error struct {
	Kind    Kind
	Message string
	// Param names the request field at fault (KindInvalid), in the
	// front's own words where it decoded the request.
	Param string
	// DecisionID is the policy decision's dec_<id> (KindPolicyDenied).
	DecisionID string
	// Denied is the limiter's refusal (KindRateLimited): the state of
	// the key's limits and when to retry.
	Denied *limits.Denied
	// Cause is the error behind a KindInternal or an engine's refusal,
	// for logs; never shown to the client.
	Cause error
	// Logged is set when the failure was already logged with the
	// request's id, so that a front does not log it again.
	Logged bool
	// NoRetry is set when the same request cannot succeed by being sent
	// again soon (a model no engine serves, a reservation the day cannot
	// hold): the HTTP front says x-should-retry: false, which the
	// official SDKs honour instead of retrying by their status rules.
	NoRetry bool
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return e.Kind.Code() + ": " + e.Message + ": " + e.Cause.Error()
	}
	return e.Kind.Code() + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

// RetryAfter is how long a client refused by the limits should wait; 0
// for other kinds.
func (e *Error) RetryAfter() time.Duration {
	if e.Denied == nil {
		return 0
	}
	return e.Denied.RetryAfter
}

// Invalid is a KindInvalid error naming param.
func Invalid(param, format string, args ...any) *Error {
	return &Error{Kind: KindInvalid, Param: param, Message: fmt.Sprintf(format, args...)}
}

// NotFound is a KindNotFound error.
func NotFound(format string, args ...any) *Error {
	return &Error{Kind: KindNotFound, Message: fmt.Sprintf(format, args...)}
}

// Internal is the KindInternal error of a failed step; cause is for logs.
func Internal(cause error) *Error {
	return &Error{Kind: KindInternal, Message: "internal error; retry with backoff", Cause: cause}
}

// AuditFullMessage is what a client is told of a request refused, or a
// reply withheld, because the audit log's disk is full.
const AuditFullMessage = "the audit log's disk is full, so no request can be recorded; requests are refused until an operator frees space; retry later"

// AuditFullRetryAfter is the Retry-After, in seconds, of a refusal for a
// full audit disk: freeing space takes an operator, not a moment.
const AuditFullRetryAfter = "10"

// AuditFull is the error of a call refused because the audit log's disk
// is full (KindUnavailable, 503 service_unavailable).
func AuditFull(cause error) *Error {
	return &Error{Kind: KindUnavailable, Message: AuditFullMessage, Cause: cause, Logged: true}
}

// IsAuditFull reports whether err is the audit log's full disk
// (auditlog.ErrDiskFull): an append that failed for it, or AuditFull.
func IsAuditFull(err error) bool { return errors.Is(err, auditlog.ErrDiskFull) }

// ShuttingDown is the error of a call ended by the gateway's shutdown.
func ShuttingDown() *Error {
	return &Error{Kind: KindUnavailable, Message: "the gateway is shutting down; retry on another gateway or later"}
}

func unauthorized() *Error {
	return &Error{Kind: KindUnauthorized, Message: "missing, expired or revoked virtual key; send it as Authorization: Bearer <key>"}
}

// authError maps an Authenticator's error.
func authError(err error) *Error {
	if errors.Is(err, keys.ErrUnauthorized) {
		return unauthorized()
	}
	return Internal(fmt.Errorf("authenticate: %w", err))
}

// AsError returns err as an *Error: itself when it is one, else the
// mapping of an engine's gRPC status (FromEngine).
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return FromEngine(err)
}

// FromEngine maps an error of an engine call (a gRPC status of the
// inference service) to what the client is told: InvalidArgument is the
// client's request, NotFound and Unavailable a model that is not served
// now (NotFound, a model no engine lists, with NoRetry), anything else
// internal. A Canceled call is internal like any other:
// whether the client has gone is decided from its context, not from the
// code, since an engine may end a call as cancelled for reasons of its own.
func FromEngine(err error) *Error {
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.InvalidArgument:
		return &Error{Kind: KindInvalid, Message: st.Message(), Cause: err}
	case codes.NotFound:
		// No engine lists the model: a retry gets the same answer.
		return &Error{Kind: KindModelUnavailable, Message: st.Message(), Cause: err, NoRetry: true}
	case codes.Unavailable:
		return &Error{Kind: KindModelUnavailable, Message: st.Message(), Cause: err}
	}
	return Internal(err)
}
