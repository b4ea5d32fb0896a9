package grpcserver

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/tollgate-dev/tollgate/internal/ids"
)

// RequestIDHeader is the response header metadata that carries every
// call's request id (req_<id>), as the HTTP gateway's x-request-id header
// does. A call that fails carries it in its trailer too, and in the
// ErrorInfo of its status (Error).
const RequestIDHeader = "x-request-id"

type requestIDKey struct{}

// RequestID is the id the interceptor gave the call in ctx, or "" outside
// one.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// withRequestID gives a call its id, sets it as header metadata (sent with
// the first response, or with the status of a call that fails at once) and
// returns the context carrying it.
func withRequestID(ctx context.Context, setHeader func(metadata.MD) error) context.Context {
	id := ids.NewRequest()
	_ = setHeader(metadata.Pairs(RequestIDHeader, id))
	return context.WithValue(ctx, requestIDKey{}, id)
}

// requestIDUnary gives every unary call its request id.
func requestIDUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	ctx = withRequestID(ctx, func(md metadata.MD) error { return grpc.SetHeader(ctx, md) })
	resp, err := next(ctx, req)
	if err != nil {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(RequestIDHeader, RequestID(ctx)))
	}
	return resp, err
}

// requestIDStream gives every streaming call its request id.
func requestIDStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, next grpc.StreamHandler) error {
	ctx := withRequestID(ss.Context(), ss.SetHeader)
	err := next(srv, &contextStream{ServerStream: ss, ctx: ctx})
	if err != nil {
		ss.SetTrailer(metadata.Pairs(RequestIDHeader, RequestID(ctx)))
	}
	return err
}

// contextStream is a ServerStream whose Context is ctx.
type contextStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *contextStream) Context() context.Context { return s.ctx }
