package edge_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate-dev/tollgate/internal/tracing"
	"github.com/tollgate-dev/tollgate/server/inference"
	"github.com/tollgate-dev/tollgate/server/inference/vllm"
	"github.com/tollgate-dev/tollgate/server/inference/vllm/vllmfake"
)

// Incoming trace context of the tests: a client's span.
const (
	clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID  = "00f067aa0ba902b7"
	traceparent   = "00-" + clientTraceID + "-" + clientSpanID + "-01"
	// prompt is a message that must not appear in any span.
	prompt = "zebrafish"
)

// spanLog records every ended span, and tells of each request span
// (a server span) once it has ended: the edge ends it after the response
// is written, so the client may see its answer first.
type spanLog struct {
	*tracetest.SpanRecorder
	served chan struct{}
}

func (l spanLog) OnEnd(s sdktrace.ReadOnlySpan) {
	if s.SpanKind() == trace.SpanKindServer {
		l.served <- struct{}{}
	}
}
func (spanLog) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (spanLog) Shutdown(context.Context) error                  { return nil }
func (spanLog) ForceFlush(context.Context) error                { return nil }

func newSpanLog(t *testing.T) (spanLog, trace.Tracer) {
	rec := tracetest.NewSpanRecorder()
	l := spanLog{SpanRecorder: rec, served: make(chan struct{}, 16)}
	// The recorder first: a request span is recorded before it is told of.
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSpanProcessor(l))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return l, tracing.NewWith(tp).Tracer()
}

func (l spanLog) await(t *testing.T) {
	t.Helper()
	select {
	case <-l.served:
	case <-t.Context().Done():
		t.Fatal("the request span never ended")
	}
}

// A chat request to a vLLM model, plain and streamed, is one trace: the
// client's traceparent is the parent of the request's span, whose children
// are every step of the pipeline, each with its duration; the model server
// gets the engine span as its parent, and nothing secret is in any span.
func TestChatTrace(t *testing.T) {
	fake := vllmfake.Start(t)
	eng, err := vllm.New(vllm.Config{Namespace: "gpu", URL: fake.URL})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	spans, tracer := newSpanLog(t)
	audit := newAuditRecorder()
	s := newStack(t, stackConfig{local: true, limits: startLimits(t), audit: audit, engines: []inference.Engine{eng}, tracer: tracer,
		policy: loadBundle(t, "package tollgate.gateway\n\ndecision := {\"allow\": true, \"reason\": \"allowed\"}\n")})
	for i, tc := range []struct {
		name   string
		stream string
	}{{"plain", ""}, {"stream", `,"stream":true`}} {
		t.Run(tc.name, func(t *testing.T) {
			req := s.newRequest(t, http.MethodPost, chatPath, keyDay, `{"model":"gpu/meta-llama/Llama-3.1-8B-Instruct","messages":[{"role":"user","content":"`+prompt+`"}]`+tc.stream+`}`)
			req.Header.Set("traceparent", traceparent)
			r := s.send(t, req)
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			ev := audit.next(t)
			spans.await(t)
			ended := spans.Ended()
			var root sdktrace.ReadOnlySpan
			for _, sp := range ended {
				if sp.SpanKind() == trace.SpanKindServer && attr(sp, "tollgate.request_id") == r.id() {
					root = sp
				}
			}
			if root == nil {
				t.Fatalf("no request span for %s among %d spans", r.id(), len(ended))
			}
			if root.Name() != "POST /v1/chat/completions" || root.SpanContext().TraceID().String() != clientTraceID ||
				root.Parent().SpanID().String() != clientSpanID || !root.Parent().IsRemote() {
				t.Errorf("request span %q trace %s parent %s", root.Name(), root.SpanContext().TraceID(), root.Parent().SpanID())
			}
			for k, want := range map[string]string{"tollgate.tenant_id": "ten_test", "tollgate.key_id": "key_day",
				"tollgate.model": "gpu/meta-llama/Llama-3.1-8B-Instruct", "http.response.status_code": "200"} {
				if got := attr(root, k); got != want {
					t.Errorf("request span %s = %q, want %q", k, got, want)
				}
			}
			children := map[string]sdktrace.ReadOnlySpan{}
			for _, sp := range ended {
				if sp.Parent().SpanID() == root.SpanContext().SpanID() {
					children[sp.Name()] = sp
				}
				for _, kv := range sp.Attributes() {
					if strings.Contains(kv.Value.String(), keyDay) || strings.Contains(kv.Value.String(), prompt) {
						t.Errorf("span %s carries %s=%q", sp.Name(), kv.Key, kv.Value.String())
					}
				}
			}
			for _, name := range []string{"authenticate", "policy", "limits", "engine", "audit.append", "settle"} {
				sp, ok := children[name]
				if !ok {
					t.Errorf("no %s span under the request's (children %v)", name, keysOf(children))
					continue
				}
				if d := sp.EndTime().Sub(sp.StartTime()); d <= 0 {
					t.Errorf("%s span lasted %v", name, d)
				}
				if sp.SpanContext().TraceID().String() != clientTraceID {
					t.Errorf("%s span in trace %s", name, sp.SpanContext().TraceID())
				}
			}
			if got := attr(children["policy"], "tollgate.decision_id"); got == "" || got != ev.PolicyDecisionID {
				t.Errorf("the policy span's decision id %q, the event's %q", got, ev.PolicyDecisionID)
			}
			// The model server got the engine span as its parent.
			h := fake.Headers("/v1/chat/completions")
			if len(h) != i+1 {
				t.Fatalf("the model server got %d requests", len(h))
			}
			want := "00-" + clientTraceID + "-" + children["engine"].SpanContext().SpanID().String() + "-01"
			if got := h[i].Get("traceparent"); got != want {
				t.Errorf("model server's traceparent %q, want %q", got, want)
			}
		})
	}
}

// Without a tracer nothing is traced, and the model server gets no
// traceparent, even when the client sent one.
func TestNoTraceWithoutTracer(t *testing.T) {
	fake := vllmfake.Start(t)
	eng, err := vllm.New(vllm.Config{Namespace: "gpu", URL: fake.URL})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	s := newStack(t, stackConfig{local: true, engines: []inference.Engine{eng}})
	req := s.newRequest(t, http.MethodPost, chatPath, keyAll, `{"model":"gpu/meta-llama/Llama-3.1-8B-Instruct",`+hi+`}`)
	req.Header.Set("traceparent", traceparent)
	wantOK(t, s.send(t, req))
	if got := fake.Headers("/v1/chat/completions")[0].Get("traceparent"); got != "" {
		t.Errorf("the model server got traceparent %q with tracing off", got)
	}
}

func attr(sp sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range sp.Attributes() {
		if kv.Key == attribute.Key(key) {
			return kv.Value.String()
		}
	}
	return ""
}

func keysOf(m map[string]sdktrace.ReadOnlySpan) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
