package edge

import (
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
	codeRateLimited       = "rate_limited"
	codeInternal          = "internal_error"
	codeModelUnavailable  = "model_unavailable"
	codeLimitsUnavailable = "limits_unavailable"

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
	Param            string `json:"param,omitempty"`
	RequestID        string `json:"request_id"`
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
// ok is false when the client has gone and nothing should be written.
func fromRPC(err error) (e *apiError, ok bool) {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae, true
	}
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.InvalidArgument:
		return &apiError{Status: http.StatusBadRequest, Code: codeInvalidRequest, Type: typeInvalidRequest, Message: st.Message()}, true
	case codes.NotFound, codes.Unavailable:
		return &apiError{Status: http.StatusServiceUnavailable, Code: codeModelUnavailable, Type: typeServer, Message: st.Message()}, true
	case codes.Canceled:
		return nil, false
	}
	return internalError(), true
}
