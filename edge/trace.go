package edge

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate-dev/tollgate/internal/tracing"
	"github.com/tollgate-dev/tollgate/server/keys"
)

// startSpan starts the span of one routed request, the child of the
// traceparent the client sent (if any), and returns r with it in its
// context: every step of the pipeline is its child, and the engine's call
// to a model server carries it on. With tracing disabled it returns r as
// it is and a span that records nothing, and reads no header.
func (s *Server) startSpan(r *http.Request, method, endpoint, requestID string) (*http.Request, trace.Span) {
	if !s.core.Tracing() {
		return r, trace.SpanFromContext(r.Context())
	}
	ctx := tracing.Extract(r.Context(), r.Header)
	ctx, span := s.core.Tracer().Start(ctx, method+" "+endpoint, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("http.request.method", method),
			attribute.String("http.route", endpoint),
			attribute.String("tollgate.request_id", requestID),
		))
	return r.WithContext(ctx), span
}

// authenticate resolves the request's key under an "authenticate" span,
// and names the key (never its secret) on the request's span.
func (s *Server) authenticate(r *http.Request, secret string) (*keys.Principal, error) {
	_, span := s.core.StartSpan(r.Context(), "authenticate")
	p, err := s.core.Authenticate(secret)
	if err != nil {
		span.SetStatus(codes.Error, "unauthenticated")
	}
	span.End()
	req := trace.SpanFromContext(r.Context())
	if !req.IsRecording() {
		return p, err
	}
	if err != nil {
		req.SetStatus(codes.Error, "unauthenticated")
		return p, err
	}
	req.SetAttributes(attribute.String("tollgate.tenant_id", p.TenantID), attribute.String("tollgate.key_id", p.KeyID))
	return p, nil
}
