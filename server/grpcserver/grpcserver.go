// Package grpcserver builds the gRPC server every internal service runs on,
// with the interceptors all of them share: panic recovery, then protovalidate
// (a constraint violation is InvalidArgument before the handler runs, its
// message in the words of the proto's rules: see describe).
package grpcserver

import (
	"context"
	"fmt"
	"log/slog"

	"buf.build/go/protovalidate"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// New returns a gRPC server with the shared interceptors and opts appended.
func New(logger *slog.Logger, opts ...grpc.ServerOption) (*grpc.Server, error) {
	validator, err := protovalidate.New()
	if err != nil {
		return nil, fmt.Errorf("grpcserver: protovalidate: %w", err)
	}
	onPanic := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		logger.ErrorContext(ctx, "panic in gRPC handler", slog.Any("panic", p))
		return status.Error(codes.Internal, "internal error")
	})
	base := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(
			recovery.UnaryServerInterceptor(onPanic),
			validateUnary(validator),
		),
		grpc.ChainStreamInterceptor(
			recovery.StreamServerInterceptor(onPanic),
			validateStream(validator),
		),
	}
	return grpc.NewServer(append(base, opts...)...), nil
}
