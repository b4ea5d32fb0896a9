package pipeline_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/inference"
	"github.com/tollgate-dev/tollgate/server/inference/builtin"
	"github.com/tollgate-dev/tollgate/server/keys"
	"github.com/tollgate-dev/tollgate/server/pipeline"
)

// A request only protovalidate refuses is refused, with the violation
// named, on both paths: the HTTP edge's (the pipeline's Chat and Embed,
// the in-process client checking the request) and the gRPC service's (its
// check before anything else, the engine call then trusting it).
func TestInvalidRequestRefusedOnEveryPath(t *testing.T) {
	engines, err := inference.NewService(builtin.New())
	if err != nil {
		t.Fatal(err)
	}
	local := inference.NewLocalClient(engines)
	principal := keys.NewPrincipal("acme", "key_test", "test", true, nil, 0, 0, nil, time.Time{})
	p := pipeline.New(pipeline.Config{Inference: local, Auth: oneKey{principal}})
	cli := serveService(t, p, 0)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer tgk_test")

	hi := []*inferencev1.Message{{Role: inferencev1.Role_ROLE_USER, Content: &inferencev1.Message_Text{Text: "hi"}}}
	for _, tc := range []struct {
		name      string
		chat      *inferencev1.ChatCompletionRequest
		embed     *inferencev1.EmbedRequest
		violation string
	}{
		{name: "five stop sequences", violation: "stop",
			chat: &inferencev1.ChatCompletionRequest{Model: builtin.EchoModel, Messages: hi, Stop: []string{"a", "b", "c", "d", "e"}}},
		{name: "max_tokens zero", violation: "max_tokens",
			chat: &inferencev1.ChatCompletionRequest{Model: builtin.EchoModel, Messages: hi, MaxTokens: new(int64)}},
		{name: "no message", violation: "messages",
			chat: &inferencev1.ChatCompletionRequest{Model: builtin.EchoModel}},
		{name: "no embedding input", violation: "inputs",
			embed: &inferencev1.EmbedRequest{Model: builtin.EmbedModel}},
	} {
		t.Run(tc.name+"/http", func(t *testing.T) {
			c := p.Begin("req_test1", "/v1/chat/completions", principal, time.Now())
			if tc.chat != nil {
				_, _, err = c.Chat(t.Context(), tc.chat, nil)
			} else {
				_, err = c.Embed(t.Context(), tc.embed)
			}
			var e *pipeline.Error
			if !errors.As(err, &e) || e.Kind != pipeline.KindInvalid || !strings.Contains(e.Message, tc.violation) {
				t.Fatalf("refused with %v; want invalid, naming %s", err, tc.violation)
			}
		})
		t.Run(tc.name+"/grpc", func(t *testing.T) {
			if tc.chat != nil {
				var stream grpc.ServerStreamingClient[inferencev1.ChatCompletionResponse]
				if stream, err = cli.ChatCompletion(ctx, tc.chat); err == nil {
					_, err = stream.Recv()
				}
			} else {
				_, err = cli.Embed(ctx, tc.embed)
			}
			if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.violation) {
				t.Fatalf("refused with %v; want InvalidArgument, naming %s", err, tc.violation)
			}
		})
	}
}
