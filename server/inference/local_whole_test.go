package inference_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/inference"
)

// panicky is an engine whose every reply panics after one event.
type panicky struct{}

func (panicky) Namespace() string { return "panicky" }
func (panicky) Models() []*inferencev1.Model {
	return []*inferencev1.Model{{Id: "panicky/m"}}
}
func (panicky) ChatCompletion(_ context.Context, _ *inferencev1.ChatCompletionRequest, send func(*inferencev1.ChatCompletionResponse) error) error {
	_ = send(&inferencev1.ChatCompletionResponse{Content: "half"})
	panic("engine bug")
}
func (panicky) Embed(context.Context, *inferencev1.EmbedRequest) (*inferencev1.EmbedResponse, error) {
	return nil, status.Error(codes.Unimplemented, "no embeddings")
}
func (panicky) CountTokens(context.Context, *inferencev1.CountTokensRequest) (*inferencev1.CountTokensResponse, error) {
	return &inferencev1.CountTokensResponse{}, nil
}

// An engine that panics fails its reply with codes.Internal, after the
// events it sent, whether it is pulled event by event (a stream) or run
// to its end at once (inference.Whole); the process goes on.
func TestLocalClientEnginePanic(t *testing.T) {
	svc, err := inference.NewService(panicky{})
	if err != nil {
		t.Fatal(err)
	}
	local := inference.NewLocalClient(svc)
	for name, opts := range map[string][]grpc.CallOption{"stream": nil, "whole": {inference.Whole()}} {
		t.Run(name, func(t *testing.T) {
			stream, err := local.ChatCompletion(context.Background(), chat("panicky/m", "hi"), opts...)
			if err != nil {
				t.Fatal(err)
			}
			if ev, err := stream.Recv(); err != nil || ev.GetContent() != "half" {
				t.Fatalf("first Recv = %v, %v; want the event sent before the panic", ev, err)
			}
			if _, err := stream.Recv(); status.Code(err) != codes.Internal {
				t.Fatalf("Recv after the panic: %v, want Internal", err)
			}
		})
	}
}
