package grpcserver

import (
	"context"
	"errors"
	"strings"

	"buf.build/go/protovalidate"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// SelfValidating is implemented by a service that validates its requests
// itself, after it has authenticated the caller (so that a bad request of
// a known key is recorded as such): the interceptor passes its calls
// through unchecked. It validates with Validator.Check.
type SelfValidating interface {
	ValidatesItself()
}

// Validator checks messages as the interceptor does, for a SelfValidating
// service.
type Validator struct{ v protovalidate.Validator }

// NewValidator returns a Validator. Every validator of the process is
// protovalidate's global one: each validator compiles its own CEL
// environment and rules, about 1.3 MB of live heap, which the collector's
// pacing (GOGC=400, internal/gctune) lets grow up to five times in the
// heap below the soft limit.
func NewValidator() *Validator {
	return &Validator{v: protovalidate.GlobalValidator}
}

// Check returns nil, or the INVALID_ARGUMENT status of a message that
// breaks a constraint, with an ErrorInfo (invalid_request, the call's
// request id from ctx) and a google.rpc.BadRequest.
func (v *Validator) Check(ctx context.Context, m proto.Message) error {
	return validate(ctx, v.v, m, true)
}

// validateUnary checks every request with protovalidate before the
// handler runs.
func validateUnary(v protovalidate.Validator, details bool) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		if _, self := info.Server.(SelfValidating); !self {
			if err := validate(ctx, v, req, details); err != nil {
				return nil, err
			}
		}
		return next(ctx, req)
	}
}

// validateStream checks every message a stream receives.
func validateStream(v protovalidate.Validator, details bool) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, next grpc.StreamHandler) error {
		if _, self := srv.(SelfValidating); self {
			return next(srv, ss)
		}
		return next(srv, &validatedStream{ServerStream: ss, v: v, details: details})
	}
}

type validatedStream struct {
	grpc.ServerStream
	v       protovalidate.Validator
	details bool
}

func (s *validatedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return validate(s.Context(), s.v, m, s.details)
}

// validate returns InvalidArgument with a readable message and the
// violations as a detail (buf.validate.Violations, as the go-grpc-middleware
// interceptor sends them) when m breaks a constraint.
//
// With details, the status also carries an ErrorInfo (invalid_request,
// the call's request id) and a google.rpc.BadRequest with one field
// violation per constraint broken.
func validate(ctx context.Context, v protovalidate.Validator, m any, details bool) error {
	msg, ok := m.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "unsupported message type %T", m)
	}
	err := v.Validate(msg)
	if err == nil {
		return nil
	}
	var verr *protovalidate.ValidationError
	if !errors.As(err, &verr) {
		// A rule that does not compile: the server's fault.
		return status.Error(codes.Internal, err.Error())
	}
	if details {
		return Error(ctx, codes.InvalidArgument, ReasonInvalidRequest, describe(verr), nil, BadRequest(verr), verr.ToProto())
	}
	st := status.New(codes.InvalidArgument, describe(verr))
	if ds, derr := st.WithDetails(verr.ToProto()); derr == nil {
		st = ds
	}
	return st.Err()
}

// describe is the message of a validation error: its violations joined by
// "; ", on one line. A violation of a CEL rule of the proto is its
// message alone, written there for the reader ("day is required
// (YYYY-MM-DD)"); one of protovalidate's standard rules is its field path
// and protovalidate's message ("leaves[0].leaf_hash: value length must be
// 32 bytes").
func describe(verr *protovalidate.ValidationError) string {
	parts := make([]string, 0, len(verr.Violations))
	for _, v := range verr.Violations {
		parts = append(parts, Describe(v))
	}
	return strings.Join(parts, "; ")
}

// Describe words one violation as the interceptor does: a CEL rule's
// message alone, or a standard rule's field path and message.
func Describe(v *protovalidate.Violation) string {
	if el := v.Proto.GetRule().GetElements(); len(el) > 0 && el[0].GetFieldName() == "cel" && v.Proto.GetMessage() != "" {
		return v.Proto.GetMessage()
	}
	return v.String()
}

// BadRequest lists the violations of verr as google.rpc.BadRequest field
// violations: the field's path and the violation's words.
func BadRequest(verr *protovalidate.ValidationError) *errdetails.BadRequest {
	br := &errdetails.BadRequest{}
	for _, v := range verr.Violations {
		br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{
			Field: protovalidate.FieldPathString(v.Proto.GetField()), Description: Describe(v),
		})
	}
	return br
}
