// Package sdk_test drives a real appliance (embedded etcd, gRPC services,
// HTTP edge) with the official openai-go SDK, changing only its base URL.
package sdk_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tollgate-dev/tollgate/appliance"
	"github.com/tollgate-dev/tollgate/audit/fleet"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/internal/seed"
	"github.com/tollgate-dev/tollgate/server/inference"
	"github.com/tollgate-dev/tollgate/server/keys"
	"github.com/tollgate-dev/tollgate/server/policy"
)

func TestMain(m *testing.M) { etcdtest.Main(m) }

// stack is a running appliance with everything on: keys in etcd, the
// default policy bundle, and a durable audit log.
type stack struct {
	base  string
	grpc  string // the gRPC listener's address
	audit *auditlog.Log
}

// start runs an appliance seeded with test/testdata/seed.yaml and returns
// its base URL.
func start(t *testing.T) string { return startStack(t).base }

func startStack(t *testing.T, engines ...inference.Engine) *stack {
	return startStackOn(t, etcdtest.Client(t), engines...)
}

// startStackOn runs an appliance on cli, serving engines besides the
// built-in models; several appliances on clients of one prefix are
// gateways of one cluster.
func startStackOn(t *testing.T, cli *clientv3.Client, engines ...inference.Engine) *stack {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	signer, _, err := fleet.EnsureDev(dir, "app_sdktest")
	if err != nil {
		t.Fatal(err)
	}
	audit, err := auditlog.Open(filepath.Join(dir, "audit"), auditlog.Options{Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Load(ctx, "../../examples/policy", policy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := seed.Load("../testdata/seed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, keys.NewStore(cli, nil)); err != nil {
		t.Fatal(err)
	}
	ready := make(chan appliance.Addrs, 1)
	done := make(chan error, 1)
	go func() {
		done <- appliance.Run(ctx, appliance.Config{
			GatewayAddr: "127.0.0.1:0",
			GRPCAddr:    "127.0.0.1:0",
			Etcd:        cli,
			Logger:      slog.New(slog.DiscardHandler),
			ApplianceID: signer.ID,
			Policy:      pol,
			Audit:       audit,
			Engines:     engines,
			OnReady:     func(a appliance.Addrs) { ready <- a },
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("appliance: %v", err)
		}
		_ = audit.Close()
	})
	select {
	case a := <-ready:
		return &stack{base: "http://" + a.Gateway + "/v1", grpc: a.GRPC, audit: audit}
	case err := <-done:
		t.Fatalf("appliance stopped before ready: %v", err)
		return nil
	}
}

func client(base, key string) *openai.Client {
	c := openai.NewClient(option.WithBaseURL(base), option.WithAPIKey(key), option.WithMaxRetries(0))
	return &c
}

const allKey = "tgk_test_acme_all"

func TestModels(t *testing.T) {
	base := start(t)
	ctx := context.Background()
	var ids []string
	iter := client(base, allKey).Models.ListAutoPaging(ctx)
	for iter.Next() {
		ids = append(ids, iter.Current().ID)
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || ids[0] != "builtin/echo" || ids[1] != "builtin/embed" {
		t.Fatalf("models = %v", ids)
	}
	m, err := client(base, allKey).Models.Get(ctx, "builtin/embed")
	if err != nil || m.ID != "builtin/embed" {
		t.Fatalf("get model: %v %v", m, err)
	}
	page, err := client(base, "tgk_test_acme_echo_only").Models.List(ctx)
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != "builtin/echo" {
		t.Fatalf("echo-only key lists %v (%v)", page, err)
	}
}

func TestChat(t *testing.T) {
	base := start(t)
	var resp *http.Response
	c, err := client(base, allKey).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "builtin/echo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("hello big world")},
	}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if c.Choices[0].Message.Content != "hello big world" || c.Choices[0].FinishReason != "stop" {
		t.Errorf("reply %q finish %q", c.Choices[0].Message.Content, c.Choices[0].FinishReason)
	}
	if c.Usage.PromptTokens != 5 || c.Usage.CompletionTokens != 3 || c.Usage.TotalTokens != 8 {
		t.Errorf("usage %+v", c.Usage)
	}
	if got := resp.Header.Get("x-request-id"); got != c.ID {
		t.Errorf("x-request-id %q, completion id %q", got, c.ID)
	}
}

func TestChatStreamAccumulated(t *testing.T) {
	base := start(t)
	stream := client(base, allKey).Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         "builtin/echo",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("one two three")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	var pieces []string
	for stream.Next() {
		chunk := stream.Current()
		if !acc.AddChunk(chunk) {
			t.Fatalf("accumulator refused chunk %s", chunk.RawJSON())
		}
		for _, ch := range chunk.Choices {
			if ch.Delta.Content != "" {
				pieces = append(pieces, ch.Delta.Content)
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(pieces) != 3 || acc.Choices[0].Message.Content != "one two three" {
		t.Errorf("pieces %q, accumulated %q", pieces, acc.Choices[0].Message.Content)
	}
	if acc.Usage.TotalTokens != 6 {
		t.Errorf("usage %+v", acc.Usage)
	}
}

func TestToolRoundTrip(t *testing.T) {
	base := start(t)
	ctx := context.Background()
	cl := client(base, allKey)
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:       "get_weather",
		Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
	})}
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage(`/tool get_weather {"city":"Oslo"}`)}
	first, err := cl.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "builtin/echo", Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	msg := first.Choices[0].Message
	if first.Choices[0].FinishReason != "tool_calls" || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != "get_weather" {
		t.Fatalf("first reply %s", first.RawJSON())
	}
	var args map[string]string
	if err := json.Unmarshal([]byte(msg.ToolCalls[0].Function.Arguments), &args); err != nil || args["city"] != "Oslo" {
		t.Fatalf("arguments %q: %v", msg.ToolCalls[0].Function.Arguments, err)
	}

	stream := cl.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "builtin/echo", Messages: msgs, Tools: tools})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if n := len(acc.Choices[0].Message.ToolCalls); n != 1 {
		t.Fatalf("streamed reply has %d tool calls, want 1", n)
	}
	if got := acc.Choices[0].Message.ToolCalls[0].Function.Arguments; got != `{"city":"Oslo"}` {
		t.Errorf("streamed arguments %q", got)
	}

	msgs = append(msgs, msg.ToParam(), openai.ToolMessage("sunny, 21 C", msg.ToolCalls[0].ID))
	second, err := cl.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "builtin/echo", Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if got := second.Choices[0].Message.Content; got != "tool result: sunny, 21 C" {
		t.Errorf("second reply %q", got)
	}
}

func TestEmbeddings(t *testing.T) {
	base := start(t)
	ctx := context.Background()
	cl := client(base, allKey)
	params := openai.EmbeddingNewParams{
		Model: "builtin/embed",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"hello world", "tollgate"}},
	}
	flt, err := cl.Embeddings.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	params.EncodingFormat = openai.EmbeddingNewParamsEncodingFormatBase64
	var b64 struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
	}
	if _, err := cl.Embeddings.New(ctx, params, option.WithResponseBodyInto(&b64)); err != nil {
		t.Fatal(err)
	}
	for i, d := range flt.Data {
		if len(d.Embedding) != 256 {
			t.Fatalf("dims %d", len(d.Embedding))
		}
		bytes, err := base64.StdEncoding.DecodeString(b64.Data[i].Embedding)
		if err != nil || len(bytes) != 4*256 {
			t.Fatalf("base64 embedding %d: %v (%d bytes)", i, err, len(bytes))
		}
		for j, v := range d.Embedding {
			if got := math.Float32frombits(binary.LittleEndian.Uint32(bytes[4*j:])); got != float32(v) {
				t.Fatalf("input %d dim %d: base64 %v, float %v", i, j, got, v)
			}
		}
	}
}

func TestErrors(t *testing.T) {
	base := start(t)
	ctx := context.Background()
	chat := func(key, model string, temp float64) error {
		p := openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}}
		if temp != 0 {
			p.Temperature = openai.Float(temp)
		}
		_, err := client(base, key).Chat.Completions.New(ctx, p)
		return err
	}
	_, embedErr := client(base, "tgk_test_acme_echo_only").Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: "builtin/embed", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")},
	})
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		code, kind string
	}{
		{"model without namespace", chat(allKey, "echo", 0), 400, "invalid_request", "invalid_request_error"},
		{"temperature out of range", chat(allKey, "builtin/echo", 3), 400, "invalid_request", "invalid_request_error"},
		{"unknown key", chat("tgk_unknown", "builtin/echo", 0), 401, "unauthorized", ""},
		{"revoked key", chat("tgk_test_acme_revoked", "builtin/echo", 0), 401, "unauthorized", ""},
		{"expired key", chat("tgk_test_acme_expired", "builtin/echo", 0), 401, "unauthorized", ""},
		{"model outside key", embedErr, 403, "policy_denied", "policy"},
		{"model not loaded", chat(allKey, "vllm/llama-3", 0), 503, "model_unavailable", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var apiErr *openai.Error
			if !errors.As(tc.err, &apiErr) {
				t.Fatalf("not an API error: %v", tc.err)
			}
			if apiErr.StatusCode != tc.status || apiErr.Code != tc.code || (tc.kind != "" && apiErr.Type != tc.kind) {
				t.Errorf("got %d %s/%s, want %d %s/%s", apiErr.StatusCode, apiErr.Code, apiErr.Type, tc.status, tc.code, tc.kind)
			}
			var env struct {
				RequestID string `json:"request_id"`
			}
			_ = json.Unmarshal([]byte(apiErr.RawJSON()), &env)
			if len(env.RequestID) < 5 || env.RequestID[:4] != "req_" {
				t.Errorf("envelope request_id %q in %s", env.RequestID, apiErr.RawJSON())
			}
		})
	}
}
