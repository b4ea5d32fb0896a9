package pipeline_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/tracing"
	"github.com/tollgate-dev/tollgate/server/inference"
	"github.com/tollgate-dev/tollgate/server/inference/builtin"
	"github.com/tollgate-dev/tollgate/server/keys"
	"github.com/tollgate-dev/tollgate/server/pipeline"
)

// appended counts the events appended; the append itself is instant.
type appended chan auditlog.Event

func (a appended) Append(_ context.Context, ev auditlog.Event) (auditlog.Receipt, error) {
	a <- ev
	return auditlog.Receipt{}, nil
}

// served tells of each server span once it has ended (after the
// recorder, registered first, has it).
type served chan struct{}

func (s served) OnEnd(sp sdktrace.ReadOnlySpan) {
	if sp.SpanKind() == trace.SpanKindServer {
		s <- struct{}{}
	}
}
func (served) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (served) Shutdown(context.Context) error                  { return nil }
func (served) ForceFlush(context.Context) error                { return nil }

// A gRPC chat call is one trace: the traceparent of its metadata is the
// parent of the call's span, whose children are the pipeline's steps.
func TestChatCallTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	done := make(served, 4)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSpanProcessor(done))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := tracing.NewWith(tp).Tracer()

	engines, err := inference.NewService(builtin.New())
	if err != nil {
		t.Fatal(err)
	}
	local := inference.NewLocalClient(engines)
	audit := make(appended, 4)
	p := pipeline.New(pipeline.Config{Inference: local, Audit: audit, Tracer: tracer,
		Auth: oneKey{keys.NewPrincipal("acme", "key_test", "test", true, nil, 0, 0, nil, time.Time{})}})
	cli := serveService(t, p, 1, grpc.ChainStreamInterceptor(tracing.StreamServerInterceptor(tracer)))

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer tgk_test", "traceparent", "00-"+traceID+"-"+parentID+"-01")
	stream, err := cli.ChatCompletion(ctx, &inferencev1.ChatCompletionRequest{Model: builtin.EchoModel,
		Messages: []*inferencev1.Message{{Role: inferencev1.Role_ROLE_USER, Content: &inferencev1.Message_Text{Text: "zebrafish"}}}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := stream.Recv(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	<-audit
	select {
	case <-done:
	case <-t.Context().Done():
		t.Fatal("the call's span never ended")
	}
	var root sdktrace.ReadOnlySpan
	for _, sp := range rec.Ended() {
		if sp.SpanKind() == trace.SpanKindServer {
			root = sp
		}
	}
	if root.Name() != inferencev1.InferenceService_ChatCompletion_FullMethodName || root.SpanContext().TraceID().String() != traceID ||
		root.Parent().SpanID().String() != parentID {
		t.Fatalf("call span %q in trace %s under %s", root.Name(), root.SpanContext().TraceID(), root.Parent().SpanID())
	}
	want := map[string]string{"tollgate.tenant_id": "acme", "tollgate.key_id": "key_test", "tollgate.model": builtin.EchoModel, "http.response.status_code": "200"}
	for _, kv := range root.Attributes() {
		if w, ok := want[string(kv.Key)]; ok && kv.Value.String() == w {
			delete(want, string(kv.Key))
		}
	}
	if len(want) > 0 {
		t.Errorf("the call span lacks %v (has %v)", want, root.Attributes())
	}
	children := map[string]bool{}
	for _, sp := range rec.Ended() {
		if sp.Parent().SpanID() != root.SpanContext().SpanID() {
			continue
		}
		if sp.EndTime().Sub(sp.StartTime()) <= 0 {
			t.Errorf("%s lasted %v", sp.Name(), sp.EndTime().Sub(sp.StartTime()))
		}
		for _, kv := range sp.Attributes() {
			if kv.Value.Type() == attribute.STRING && kv.Value.AsString() == "zebrafish" {
				t.Errorf("%s carries the prompt in %s", sp.Name(), kv.Key)
			}
		}
		children[sp.Name()] = true
	}
	// No limits here: no limits span.
	for _, name := range []string{"authenticate", "policy", "engine", "audit.append", "settle"} {
		if !children[name] {
			t.Errorf("no %s span under the call's (%v)", name, children)
		}
	}
}
