package inference_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/grpctest"
	"github.com/tollgate-dev/tollgate/server/inference"
	"github.com/tollgate-dev/tollgate/server/inference/builtin"
)

// dial serves the service over a real gRPC server, interceptors included.
func dial(t *testing.T) inferencev1.InferenceServiceClient {
	t.Helper()
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) {
		inferencev1.RegisterInferenceServiceServer(s, newService(t))
	})
	return inferencev1.NewInferenceServiceClient(conn)
}

func chat(model, text string) *inferencev1.ChatCompletionRequest {
	return &inferencev1.ChatCompletionRequest{RequestId: "req_test1", Model: model, Messages: []*inferencev1.Message{
		{Role: inferencev1.Role_ROLE_USER, Content: &inferencev1.Message_Text{Text: text}},
	}}
}

func TestListModels(t *testing.T) {
	resp, err := dial(t).ListModels(context.Background(), &inferencev1.ListModelsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range resp.GetModels() {
		ids = append(ids, m.GetId())
	}
	if len(ids) != 2 || ids[0] != "builtin/echo" || ids[1] != "builtin/embed" {
		t.Fatalf("models = %v", ids)
	}
}

// both returns the service over real gRPC and in-process: every test below
// must pass identically on each.
func both(t *testing.T) map[string]inferencev1.InferenceServiceClient {
	local := inference.NewLocalClient(newService(t))
	return map[string]inferencev1.InferenceServiceClient{"grpc": dial(t), "local": local, "local, whole": wholeClient{local},
		"grpc, whole": wholeClient{dial(t)}}
}

// wholeClient asks for every reply read whole (inference.Whole), as the
// pipeline does for a reply it does not stream.
type wholeClient struct {
	inferencev1.InferenceServiceClient
}

func (c wholeClient) ChatCompletion(ctx context.Context, in *inferencev1.ChatCompletionRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[inferencev1.ChatCompletionResponse], error) {
	return c.InferenceServiceClient.ChatCompletion(ctx, in, append(opts, inference.Whole())...)
}

func TestChatCompletionStream(t *testing.T) {
	for name, cli := range both(t) {
		t.Run(name, func(t *testing.T) { testChatCompletionStream(t, cli) })
	}
}

func testChatCompletionStream(t *testing.T, cli inferencev1.InferenceServiceClient) {
	stream, err := cli.ChatCompletion(context.Background(), chat("builtin/echo", "hi there"))
	if err != nil {
		t.Fatal(err)
	}
	var text string
	var last *inferencev1.ChatCompletionResponse
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		text += ev.GetContent()
		last = ev
	}
	if text != "hi there" || last.GetFinishReason() != inferencev1.FinishReason_FINISH_REASON_STOP {
		t.Fatalf("text %q finish %v", text, last.GetFinishReason())
	}
}

func TestErrors(t *testing.T) {
	for name, cli := range both(t) {
		t.Run(name, func(t *testing.T) { testErrors(t, cli) })
	}
}

func testErrors(t *testing.T, cli inferencev1.InferenceServiceClient) {
	for _, tc := range []struct {
		name string
		req  *inferencev1.ChatCompletionRequest
		want codes.Code
	}{
		{"model without namespace", chat("echo", "x"), codes.InvalidArgument},
		{"unknown namespace", chat("vllm/llama", "x"), codes.NotFound},
		{"unknown builtin model", chat("builtin/nope", "x"), codes.NotFound},
		{"no messages", &inferencev1.ChatCompletionRequest{RequestId: "req_1", Model: "builtin/echo"}, codes.InvalidArgument},
		{"bad request id", &inferencev1.ChatCompletionRequest{RequestId: "nope", Model: "builtin/echo", Messages: chat("builtin/echo", "x").Messages}, codes.InvalidArgument},
		{"unspecified role", &inferencev1.ChatCompletionRequest{RequestId: "req_1", Model: "builtin/echo", Messages: []*inferencev1.Message{{}}}, codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream, err := cli.ChatCompletion(context.Background(), tc.req)
			if err == nil {
				_, err = stream.Recv()
			}
			if status.Code(err) != tc.want {
				t.Fatalf("code = %v (%v), want %v", status.Code(err), err, tc.want)
			}
		})
	}
}

// reasoning_effort is one of OpenAI's values or unset, in a completion and
// in a count alike; builtin/echo, which does not reason, accepts and
// ignores it (docs/builtin-engine.md).
func TestReasoningEffortValues(t *testing.T) {
	for name, cli := range both(t) {
		t.Run(name, func(t *testing.T) { testReasoningEffortValues(t, cli) })
	}
}

func testReasoningEffortValues(t *testing.T, cli inferencev1.InferenceServiceClient) {
	try := func(effort *string) (error, error) {
		req := chat("builtin/echo", "hi there")
		req.ReasoningEffort = effort
		stream, err := cli.ChatCompletion(context.Background(), req)
		for err == nil {
			_, err = stream.Recv()
		}
		if errors.Is(err, io.EOF) {
			err = nil
		}
		_, countErr := cli.CountTokens(context.Background(), &inferencev1.CountTokensRequest{Model: req.Model, Messages: req.Messages, ReasoningEffort: effort})
		return err, countErr
	}
	if chatErr, countErr := try(nil); chatErr != nil || countErr != nil {
		t.Fatalf("unset: %v, %v", chatErr, countErr)
	}
	for _, v := range []string{"none", "minimal", "low", "medium", "high", "xhigh", "max"} {
		if chatErr, countErr := try(&v); chatErr != nil || countErr != nil {
			t.Errorf("%q: %v, %v", v, chatErr, countErr)
		}
	}
	for _, v := range []string{"", "maximum", "High", "auto"} {
		chatErr, countErr := try(&v)
		if status.Code(chatErr) != codes.InvalidArgument || status.Code(countErr) != codes.InvalidArgument {
			t.Errorf("%q: %v, %v; want InvalidArgument", v, chatErr, countErr)
		}
	}
}

func TestCountTokensMatchesUsage(t *testing.T) {
	cli := dial(t)
	req := chat("builtin/echo", "count  these\nfour tokens")
	resp, err := cli.CountTokens(context.Background(), &inferencev1.CountTokensRequest{Model: req.Model, Messages: req.Messages})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := cli.ChatCompletion(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var usage *inferencev1.Usage
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetUsage() != nil {
			usage = ev.GetUsage()
		}
	}
	if resp.GetPromptTokens() != 4 || usage.GetPromptTokens() != resp.GetPromptTokens() {
		t.Fatalf("CountTokens %d, usage %v", resp.GetPromptTokens(), usage)
	}
}

// Cancelling the caller's context ends the in-process engine call: the
// stream reports Canceled.
func TestLocalClientCancel(t *testing.T) {
	local := inference.NewLocalClient(newService(t))
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := local.ChatCompletion(ctx, chat("builtin/echo", "/delay 60000 never arrives"))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := stream.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("Recv after cancel: %v, want Canceled", err)
	}
}

// A reply read whole runs the engine on the caller's goroutine: cancelling
// the context ends it there, and the call reports Canceled.
func TestLocalClientWholeCancel(t *testing.T) {
	local := inference.NewLocalClient(newService(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := time.AfterFunc(10*time.Millisecond, cancel) // while the engine waits
	defer stop.Stop()
	stream, err := local.ChatCompletion(ctx, chat("builtin/echo", "/delay 60000 never arrives"), inference.Whole())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("Recv after cancel: %v, want Canceled", err)
	}
}

func newService(tb testing.TB) *inference.Service {
	tb.Helper()
	svc, err := inference.NewService(builtin.New())
	if err != nil {
		tb.Fatal(err)
	}
	return svc
}

func TestNewServiceRefusesARepeatedNamespace(t *testing.T) {
	if _, err := inference.NewService(builtin.New(), builtin.New()); err == nil || !strings.Contains(err.Error(), `"builtin"`) {
		t.Fatalf("two builtin engines: %v", err)
	}
}

// The in-process client checks a request unless told that its caller has
// (inference.Validated); a gRPC client ignores the option, the server
// checking as always.
func TestValidatedSkipsOnlyTheLocalCheck(t *testing.T) {
	local := inference.NewLocalClient(newService(t))
	// Five stop sequences: protovalidate refuses them, the engine does not.
	bad := chat(builtin.EchoModel, "hi")
	bad.Stop = []string{"a", "b", "c", "d", "e"}
	for _, tc := range []struct {
		name   string
		cli    inferencev1.InferenceServiceClient
		opts   []grpc.CallOption
		refuse bool
	}{
		{"local", local, nil, true},
		{"local, validated", local, []grpc.CallOption{inference.Validated()}, false},
		{"grpc", dial(t), nil, true},
		{"grpc, validated", dial(t), []grpc.CallOption{inference.Validated()}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ev *inferencev1.ChatCompletionResponse
			stream, err := tc.cli.ChatCompletion(context.Background(), bad, tc.opts...)
			if err == nil {
				ev, err = stream.Recv()
			}
			switch {
			case tc.refuse && status.Code(err) != codes.InvalidArgument:
				t.Fatalf("%v, %v; want InvalidArgument", ev, err)
			case !tc.refuse && (err != nil || ev.GetContent() == ""):
				t.Fatalf("%v, %v; want the engine's reply", ev, err)
			}
		})
	}
}
