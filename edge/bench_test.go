package edge_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tollgate-dev/tollgate/internal/tracing"
)

// The benchmarks call the edge's ServeHTTP directly with a recorder, so
// they measure the edge and the inference call, not an HTTP client. Each
// runs over real gRPC (a loopback gRPC server with the production
// interceptors) and over the in-process client the appliance uses.

const (
	benchChat   = `{"model":"builtin/echo","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"hello big wide world of tokens"}],"temperature":0.2,"max_tokens":64}`
	benchStream = `{"model":"builtin/echo","messages":[{"role":"user","content":"hello big wide world of tokens"}],"stream":true,"stream_options":{"include_usage":true}}`
)

func BenchmarkChatCompletion(b *testing.B) {
	benchEachTransport(b, benchChat, `"finish_reason":"stop"`)
}

func BenchmarkChatCompletionStream(b *testing.B) {
	benchEachTransport(b, benchStream, "data: [DONE]\n\n")
}

// BenchmarkChatCompletionTraced is BenchmarkChatCompletion in-process
// with tracing on: every span recorded and batched to an exporter that
// drops them, which is the gateway's own cost of tracing
// (docs/tracing.md). The "local" runs above are tracing off.
func BenchmarkChatCompletionTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	s := newStack(b, stackConfig{local: true, tracer: tracing.NewWith(tp).Tracer()})
	benchServe(b, s, benchChat, `"finish_reason":"stop"`)
}

func benchEachTransport(b *testing.B, body, wantSuffixOrPart string) {
	for _, local := range []bool{false, true} {
		name := "grpc"
		if local {
			name = "local"
		}
		b.Run(name, func(b *testing.B) {
			s := newStack(b, stackConfig{local: local})
			benchServe(b, s, body, wantSuffixOrPart)
		})
	}
}

func benchServe(b *testing.B, s *stack, body, want string) {
	b.Helper()
	serve := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+keyAll)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.edge.ServeHTTP(rec, req)
		return rec
	}
	if rec := serve(); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), want) {
		b.Fatalf("status %d, body %s", rec.Code, rec.Body)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if rec := serve(); rec.Code != http.StatusOK {
			b.Fatalf("status %d, body %s", rec.Code, rec.Body)
		}
	}
}
