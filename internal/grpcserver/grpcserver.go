// Package grpcserver builds the gRPC server every internal service runs on,
// with the interceptors all of them share: panic recovery, then (for the
// appliance's server) the request id and access control, then protovalidate
// (a constraint violation is InvalidArgument before the handler runs, its
// message in the words of the proto's rules: see describe).
package grpcserver

import (
	"context"
	"log/slog"

	"buf.build/go/protovalidate"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// New returns a gRPC server with the shared interceptors and opts appended.
func New(logger *slog.Logger, opts ...grpc.ServerOption) *grpc.Server {
	return newServer(logger, false, nil, opts)
}

// NewWithRequestIDs is New for the appliance's services: every call gets a
// request id (RequestID, the x-request-id header metadata) before anything
// else runs, and a request that breaks a constraint is INVALID_ARGUMENT
// with an ErrorInfo (reason invalid_request, the request id) and a
// google.rpc.BadRequest naming each field, besides the violations.
func NewWithRequestIDs(logger *slog.Logger, opts ...grpc.ServerOption) *grpc.Server {
	return newServer(logger, true, nil, opts)
}

// Guard is access control: which caller may call which method.
type Guard interface {
	Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error)
	Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, next grpc.StreamHandler) error
}

// NewGuarded is NewWithRequestIDs with guard run on every call after the
// call has its request id (so that a refusal carries it) and before the
// request is validated (so that a caller without access is refused
// whatever its request holds, and learns nothing of it).
func NewGuarded(logger *slog.Logger, guard Guard, opts ...grpc.ServerOption) *grpc.Server {
	return newServer(logger, true, guard, opts)
}

func newServer(logger *slog.Logger, requestIDs bool, guard Guard, opts []grpc.ServerOption) *grpc.Server {
	validator := protovalidate.GlobalValidator // one per process (NewValidator)
	onPanic := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		logger.ErrorContext(ctx, "panic in gRPC handler", slog.Any("panic", p))
		return status.Error(codes.Internal, "internal error")
	})
	unary := []grpc.UnaryServerInterceptor{recovery.UnaryServerInterceptor(onPanic)}
	stream := []grpc.StreamServerInterceptor{recovery.StreamServerInterceptor(onPanic)}
	if requestIDs {
		unary = append(unary, requestIDUnary)
		stream = append(stream, requestIDStream)
	}
	if guard != nil {
		unary = append(unary, guard.Unary)
		stream = append(stream, guard.Stream)
	}
	unary = append(unary, validateUnary(validator, requestIDs))
	stream = append(stream, validateStream(validator, requestIDs))
	base := []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(stream...)}
	return grpc.NewServer(append(base, opts...)...)
}
