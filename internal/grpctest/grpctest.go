// Package grpctest serves services on a real gRPC server for tests: the
// server is built by grpcserver.New, so requests pass the same interceptors
// (protovalidate, recovery) as in production, over a loopback listener.
package grpctest

import (
	"log/slog"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tollgate-dev/tollgate/internal/grpcserver"
)

// Serve builds a server, lets register add services to it, serves it on
// 127.0.0.1 and returns a client connection; both end with the test.
func Serve(tb testing.TB, register func(grpc.ServiceRegistrar), opts ...grpc.ServerOption) *grpc.ClientConn {
	tb.Helper()
	srv := grpcserver.New(slog.New(slog.DiscardHandler), opts...)
	register(srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	tb.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return conn
}
