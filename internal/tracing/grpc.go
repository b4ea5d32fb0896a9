package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// UnaryServerInterceptor starts the span of every unary call, the child
// of the traceparent of its metadata (if any), and puts it in the
// handler's context.
func UnaryServerInterceptor(tracer trace.Tracer) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		ctx, span := startRPC(ctx, tracer, info.FullMethod)
		defer span.End()
		resp, err := next(ctx, req)
		endRPC(span, err)
		return resp, err
	}
}

// StreamServerInterceptor is UnaryServerInterceptor for streaming calls:
// the span lasts until the handler returns, the stream's last message
// sent.
func StreamServerInterceptor(tracer trace.Tracer) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, next grpc.StreamHandler) error {
		ctx, span := startRPC(ss.Context(), tracer, info.FullMethod)
		defer span.End()
		err := next(srv, tracedStream{ServerStream: ss, ctx: ctx})
		endRPC(span, err)
		return err
	}
}

func startRPC(ctx context.Context, tracer trace.Tracer, method string) (context.Context, trace.Span) {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		ctx = ExtractCarrier(ctx, Carrier(md))
	}
	return tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("rpc.system", "grpc"), attribute.String("rpc.method", method)))
}

func endRPC(span trace.Span, err error) {
	if err == nil {
		return
	}
	st, _ := status.FromError(err)
	span.SetAttributes(attribute.String("rpc.grpc.status_code", st.Code().String()))
	span.SetStatus(codes.Error, st.Code().String())
}

// tracedStream is a server stream whose context carries the call's span.
type tracedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s tracedStream) Context() context.Context { return s.ctx }
