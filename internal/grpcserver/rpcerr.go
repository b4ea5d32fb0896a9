package grpcserver

import (
	"context"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
)

// ErrorDomain is the domain of every ErrorInfo the appliance's gRPC
// services send.
const ErrorDomain = "tollgate.dev"

// The reasons of an ErrorInfo: the spec's error.code, the same words the
// HTTP gateway's error envelope uses.
const (
	ReasonUnauthorized = "unauthorized"
	// ReasonForbidden: the caller's credential is valid but does not give
	// access to the method or the tenant; PERMISSION_DENIED (the word
	// the central plane's audit API uses).
	ReasonForbidden        = "forbidden"
	ReasonPolicyDenied     = "policy_denied"
	ReasonRateLimited      = "rate_limited"
	ReasonModelUnavailable = "model_unavailable"
	ReasonInvalidRequest   = "invalid_request"
	ReasonInternal         = "internal_error"
	ReasonNotFound         = "not_found"
	// ReasonLimitsUnavailable: the key's limits cannot be checked now
	// (etcd unreachable and nothing held); UNAVAILABLE.
	ReasonLimitsUnavailable = "limits_unavailable"
	// ReasonUnavailable: the appliance cannot serve the call now (it is
	// shutting down, or starting); UNAVAILABLE.
	ReasonUnavailable = "service_unavailable"
	// ReasonCanceled: the caller cancelled the call.
	ReasonCanceled = "canceled"
)

// MetadataRequestID and MetadataDecisionID are the ErrorInfo metadata
// keys of the call's request id and, for a policy denial, its decision id.
const (
	MetadataRequestID  = "request_id"
	MetadataDecisionID = "policy_decision_id"
)

// Error returns a status error of code c whose ErrorInfo carries reason and
// the call's request id (from ctx, when the interceptor gave it one), with
// md added to its metadata and details after it.
func Error(ctx context.Context, c codes.Code, reason, msg string, md map[string]string, details ...protoadapt.MessageV1) error {
	meta := make(map[string]string, len(md)+1)
	for k, v := range md {
		meta[k] = v
	}
	if id := RequestID(ctx); id != "" {
		meta[MetadataRequestID] = id
	}
	all := append([]protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain, Metadata: meta}}, details...)
	st, err := status.New(c, msg).WithDetails(all...)
	if err != nil {
		return status.Error(c, msg)
	}
	return st.Err()
}

// ErrorInfo returns the ErrorInfo of ErrorDomain in a status, or nil.
func ErrorInfo(st *status.Status) *errdetails.ErrorInfo {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == ErrorDomain {
			return info
		}
	}
	return nil
}
