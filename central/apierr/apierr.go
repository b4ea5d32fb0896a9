// Package apierr carries the central plane's error codes in gRPC statuses
// (a google.rpc.ErrorInfo whose reason is the code) and maps a status to
// the REST error envelope: HTTP status, error.code and error.type.
package apierr

import (
	"net/http"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Domain of every ErrorInfo the central plane sends.
const Domain = "central.tollgate.dev"

// Codes of the audit API (error.code in the REST envelope).
const (
	ReasonInvalidRequest = "invalid_request"
	// ReasonPageSizeRequired: a heads list without page_size does not fit
	// one response; the client is to page (400, like invalid_request).
	ReasonPageSizeRequired = "page_size_required"
	ReasonUnauthorized     = "unauthorized"
	ReasonForbidden        = "forbidden"
	ReasonNotFound         = "not_found"
	ReasonRequestNotFound  = "request_not_found"
	ReasonProofExpired     = "proof_expired"
	ReasonMethodNotAllowed = "method_not_allowed"
	ReasonUnavailable      = "service_unavailable"
	ReasonInternal         = "internal_error"
	// ReasonHeadNotFound: the tree holds no head of a size a consistency
	// proof was asked between (404).
	ReasonHeadNotFound = "head_not_found"
	// ReasonSizeOutOfRange: a consistency proof's size is above the
	// tree's latest head (400, OutOfRange: a later head may reach it).
	ReasonSizeOutOfRange = "size_out_of_range"
)

// New returns a status error with code c whose ErrorInfo reason is reason.
func New(c codes.Code, reason, msg string) error {
	return WithMetadata(c, reason, msg, nil)
}

// WithMetadata is New with ErrorInfo metadata.
func WithMetadata(c codes.Code, reason, msg string, md map[string]string) error {
	st, err := status.New(c, msg).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: Domain, Metadata: md})
	if err != nil {
		return status.Error(c, msg)
	}
	return st.Err()
}

// Info returns the ErrorInfo of a status (nil when it has none of Domain).
func Info(st *status.Status) *errdetails.ErrorInfo {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == Domain {
			return info
		}
	}
	return nil
}

// byReason overrides the status of a code whose gRPC code alone does not
// say it.
var byReason = map[string]int{
	ReasonProofExpired: http.StatusGone,
}

// byCode maps gRPC codes to HTTP statuses and default codes.
var byCode = map[codes.Code]struct {
	status int
	reason string
}{
	codes.InvalidArgument:    {http.StatusBadRequest, ReasonInvalidRequest},
	codes.OutOfRange:         {http.StatusBadRequest, ReasonInvalidRequest},
	codes.Unauthenticated:    {http.StatusUnauthorized, ReasonUnauthorized},
	codes.PermissionDenied:   {http.StatusForbidden, ReasonForbidden},
	codes.NotFound:           {http.StatusNotFound, ReasonNotFound},
	codes.Unimplemented:      {http.StatusNotFound, ReasonNotFound},
	codes.FailedPrecondition: {http.StatusConflict, "failed_precondition"},
	codes.Unavailable:        {http.StatusServiceUnavailable, ReasonUnavailable},
	codes.DeadlineExceeded:   {http.StatusServiceUnavailable, ReasonUnavailable},
	codes.Canceled:           {499, "canceled"},
}

// HTTP returns the HTTP status, error.code and error.type of a status.
// Error types follow the gateway's (docs/gateway-api.md): OpenAI's names.
func HTTP(st *status.Status) (httpStatus int, code, typ string) {
	httpStatus, code = http.StatusInternalServerError, ReasonInternal
	if m, ok := byCode[st.Code()]; ok {
		httpStatus, code = m.status, m.reason
	}
	if info := Info(st); info != nil && info.GetReason() != "" {
		code = info.GetReason()
		if s, ok := byReason[code]; ok {
			httpStatus = s
		}
	}
	return httpStatus, code, TypeOf(httpStatus)
}

// TypeOf is error.type for an HTTP status.
func TypeOf(httpStatus int) string {
	switch {
	case httpStatus == http.StatusUnauthorized:
		return "authentication_error"
	case httpStatus == http.StatusForbidden:
		return "permission_error"
	case httpStatus >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}
