package pipeline

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"google.golang.org/grpc"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/inference"
	"github.com/tollgate-dev/tollgate/server/inference/builtin"
)

// Reply.Ready says whether Next returns without waiting: while events the
// engine produced are buffered, not once the finish event is returned, and
// not for a stream that cannot tell (gRPC's). The in-process engine's reply
// read whole has every event buffered once the call returns.
func TestReplyReady(t *testing.T) {
	svc, err := inference.NewService(builtin.New())
	if err != nil {
		t.Fatal(err)
	}
	local := inference.NewLocalClient(svc)
	req := &inferencev1.ChatCompletionRequest{RequestId: "req_ready1", Model: builtin.EchoModel, Messages: []*inferencev1.Message{
		{Role: inferencev1.Role_ROLE_USER, Content: &inferencev1.Message_Text{Text: "one two three four"}},
	}}
	stream, err := local.ChatCompletion(context.Background(), req, inference.Whole())
	if err != nil {
		t.Fatal(err)
	}
	c := &Call{id: "req_ready1"}
	r := &Reply{call: c, stream: stream, filter: newToolFilter(nil, slog.New(slog.DiscardHandler), c.id)}
	events := 0
	for !r.Done() {
		if !r.Ready() {
			t.Fatalf("not ready before event %d of a reply read whole", events+1)
		}
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		events++
	}
	if events < 2 {
		t.Fatalf("%d events: the echo should send several", events)
	}
	if r.Ready() {
		t.Fatal("ready after the finish event")
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("Next after the finish: %v", err)
	}
	// A stream that cannot say what it holds is never ready.
	opaque := &Reply{call: c, stream: opaqueStream{stream}, filter: r.filter}
	if opaque.Ready() {
		t.Fatal("a stream without Buffered is ready")
	}
}

// opaqueStream hides a stream's Buffered, as a gRPC client's stream has none.
type opaqueStream struct {
	grpc.ServerStreamingClient[inferencev1.ChatCompletionResponse]
}
