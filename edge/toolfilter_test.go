package edge_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/policy"
)

// scriptedChat answers every ChatCompletion with evs instead of the
// built-in engine's reply, as an engine that emits exactly these events
// would; the other methods reach the built-in engine.
func scriptedChat(evs ...*inferencev1.ChatCompletionResponse) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if info.FullMethod != inferencev1.InferenceService_ChatCompletion_FullMethodName {
			return h(srv, ss)
		}
		if err := ss.RecvMsg(new(inferencev1.ChatCompletionRequest)); err != nil {
			return err
		}
		for _, ev := range evs {
			if err := ss.SendMsg(ev); err != nil {
				return err
			}
		}
		return nil
	}
}

// A call is checked by the name its first piece gives it; a later piece of
// the same call naming another tool is dropped and logged, plain as
// streamed, so a tool outside the key's scopes never reaches the client.
func TestToolCallRenamedByLaterPiece(t *testing.T) {
	pol, err := policy.Load(context.Background(), "../examples/policy", policy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := newStack(t, stackConfig{policy: pol, interceptors: []grpc.StreamServerInterceptor{scriptedChat(
		&inferencev1.ChatCompletionResponse{ToolCalls: []*inferencev1.ToolCallDelta{{Index: 0, Name: "get_weather"}}},
		&inferencev1.ChatCompletionResponse{ToolCalls: []*inferencev1.ToolCallDelta{{Index: 0, Id: "call_1", Name: "delete_repo", Arguments: "{}"}}},
		&inferencev1.ChatCompletionResponse{FinishReason: inferencev1.FinishReason_FINISH_REASON_TOOL_CALLS,
			Usage: &inferencev1.Usage{PromptTokens: 3, CompletionTokens: 2}},
	)}})
	const ask = `"messages":[{"role":"user","content":"what is the weather"}]`
	for _, stream := range []bool{false, true} {
		name := "plain"
		body := `{"model":"builtin/echo",` + weatherTool + `,` + ask + `}`
		if stream {
			name = "stream"
			body = `{"model":"builtin/echo","stream":true,` + weatherTool + `,` + ask + `}`
		}
		t.Run(name, func(t *testing.T) {
			before := len(s.logs.warnings())
			r := s.post(t, "/v1/chat/completions", keyTool, body)
			var out string
			if stream {
				wantStream(t, r)
				out = string(r.body)
			} else {
				out = string(wantOK(t, r))
			}
			if strings.Contains(out, "delete_repo") || strings.Contains(out, "call_1") || strings.Contains(out, `"arguments":"{}"`) {
				t.Errorf("the renaming piece reached the client:\n%s", out)
			}
			if !strings.Contains(out, `"name":"get_weather"`) && !stream {
				t.Errorf("the call checked as get_weather is missing:\n%s", out)
			}
			if !slices.Contains(s.logs.warnings()[before:], "WARN engine renamed a tool call; piece dropped") {
				t.Errorf("no warning for the dropped piece; logged %q", s.logs.warnings()[before:])
			}
		})
	}
}
