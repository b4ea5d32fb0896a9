package vllm_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/inference/vllm"
	"github.com/tollgate-dev/tollgate/server/inference/vllm/vllmfake"
)

const (
	chatID  = "meta-llama/Llama-3.1-8B-Instruct"
	chatMdl = "gpu/" + chatID
	embedID = "intfloat/e5-small"
	embMdl  = "emb/" + embedID
)

// newEngine starts a fake vLLM server with models and an engine over it,
// its model list read.
func newEngine(t *testing.T, cfg vllm.Config, models ...vllmfake.Model) (*vllm.Engine, *vllmfake.Server) {
	t.Helper()
	srv := vllmfake.Start(t, models...)
	cfg.URL = srv.URL
	if cfg.Namespace == "" {
		cfg.Namespace = "gpu"
	}
	e, err := vllm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	return e, srv
}

func user(text string) *inferencev1.Message {
	return &inferencev1.Message{Role: inferencev1.Role_ROLE_USER, Content: &inferencev1.Message_Text{Text: text}}
}

// collect runs a completion and returns its events.
func collect(t *testing.T, e *vllm.Engine, req *inferencev1.ChatCompletionRequest) ([]*inferencev1.ChatCompletionResponse, error) {
	t.Helper()
	var evs []*inferencev1.ChatCompletionResponse
	err := e.ChatCompletion(t.Context(), req, func(ev *inferencev1.ChatCompletionResponse) error {
		evs = append(evs, proto.Clone(ev).(*inferencev1.ChatCompletionResponse))
		return nil
	})
	return evs, err
}

// reply folds events into the text, the last event, and checks the
// engine's contract: only the last event finishes, and it has usage.
func reply(t *testing.T, evs []*inferencev1.ChatCompletionResponse) (string, *inferencev1.ChatCompletionResponse) {
	t.Helper()
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	var b strings.Builder
	for i, ev := range evs {
		last := i == len(evs)-1
		if (ev.GetFinishReason() != inferencev1.FinishReason_FINISH_REASON_UNSPECIFIED) != last || (ev.GetUsage() != nil) != last {
			t.Fatalf("event %d of %d: %v", i, len(evs), ev)
		}
		b.WriteString(ev.GetContent())
	}
	return b.String(), evs[len(evs)-1]
}

func TestModelsListed(t *testing.T) {
	e, _ := newEngine(t, vllm.Config{}, vllmfake.Model{ID: chatID, MaxModelLen: 3000}, vllmfake.Model{ID: "bad id with spaces"})
	models := e.Models()
	// max_model_len is the context; a vLLM model has no output limit of
	// its own beyond it.
	if len(models) != 1 || models[0].GetId() != chatMdl || models[0].GetKind() != inferencev1.ModelKind_MODEL_KIND_CHAT ||
		models[0].GetOwnedBy() != "vllm" || models[0].GetCreated() == 0 ||
		models[0].GetContextLength() != 3000 || models[0].GetMaxOutputTokens() != 0 {
		t.Fatalf("models %v", models)
	}
	emb, _ := newEngine(t, vllm.Config{Namespace: "emb", Embedding: true}, vllmfake.Model{ID: embedID, Embedding: true})
	if m := emb.Models(); len(m) != 1 || m[0].GetId() != embMdl || m[0].GetKind() != inferencev1.ModelKind_MODEL_KIND_EMBEDDING {
		t.Fatalf("models %v", m)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, cfg := range []vllm.Config{
		{Namespace: "", URL: "http://127.0.0.1:8000"},
		{Namespace: "a/b", URL: "http://127.0.0.1:8000"},
		{Namespace: "gpu", URL: "127.0.0.1:8000"},
		{Namespace: "gpu", URL: "ftp://h"},
		{Namespace: "gpu", URL: "http://h/?x=1"},
	} {
		if _, err := vllm.New(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

func TestChatReply(t *testing.T) {
	e, srv := newEngine(t, vllm.Config{})
	cases := []struct {
		name       string
		req        *inferencev1.ChatCompletionRequest
		want       string
		finish     inferencev1.FinishReason
		completion int64
	}{
		{"stop", &inferencev1.ChatCompletionRequest{RequestId: "req_01abc", Model: chatMdl, Messages: []*inferencev1.Message{user("hello big world")}},
			"hello big world", inferencev1.FinishReason_FINISH_REASON_STOP, 4}, // three words and EOS
		{"length", &inferencev1.ChatCompletionRequest{Model: chatMdl, Messages: []*inferencev1.Message{user("hello big world")}, MaxTokens: proto.Int64(2)},
			"hello big ", inferencev1.FinishReason_FINISH_REASON_LENGTH, 2},
		{"stop string", &inferencev1.ChatCompletionRequest{Model: chatMdl, Messages: []*inferencev1.Message{user("hello big world")}, Stop: []string{"world"}},
			"hello big ", inferencev1.FinishReason_FINISH_REASON_STOP, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := collect(t, e, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			text, last := reply(t, evs)
			if text != tc.want || last.GetFinishReason() != tc.finish || last.GetUsage().GetCompletionTokens() != tc.completion {
				t.Errorf("reply %q, %v, usage %v; want %q, %v, %d completion", text, last.GetFinishReason(), last.GetUsage(), tc.want, tc.finish, tc.completion)
			}
			n, err := e.CountTokens(t.Context(), &inferencev1.CountTokensRequest{Model: chatMdl, Messages: tc.req.GetMessages()})
			if err != nil || n.GetPromptTokens() != last.GetUsage().GetPromptTokens() || n.GetContextLength() != vllmfake.DefaultMaxModelLen {
				t.Errorf("CountTokens %v (%v), usage.prompt_tokens %d, context %d", n, err, last.GetUsage().GetPromptTokens(), vllmfake.DefaultMaxModelLen)
			}
		})
	}
	// What the server was sent: always streamed with usage, whatever the
	// caller does with the events.
	sent := srv.Requests("/v1/chat/completions")
	var first map[string]any
	if err := json.Unmarshal(sent[0], &first); err != nil {
		t.Fatal(err)
	}
	if first["model"] != chatID || first["stream"] != true || !strings.Contains(string(sent[0]), `"stream_options":{"include_usage":true}`) {
		t.Errorf("sent %s", sent[0])
	}
	// The gateway's request id is vLLM's too, so both logs name it alike.
	if h := srv.Headers("/v1/chat/completions")[0]; h.Get("X-Request-Id") != "req_01abc" || h.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", h)
	}
}

// The count that limits reserve is the completion's prompt_tokens, tools,
// tool calls, developer messages and content parts included.
func TestCountTokensMatchesUsage(t *testing.T) {
	e, _ := newEngine(t, vllm.Config{})
	msgs := []*inferencev1.Message{
		{Role: inferencev1.Role_ROLE_DEVELOPER, Content: &inferencev1.Message_Text{Text: "be brief"}},
		{Role: inferencev1.Role_ROLE_USER, Content: &inferencev1.Message_Parts{Parts: &inferencev1.ContentParts{Parts: []*inferencev1.ContentPart{{Text: "what is"}, {Text: "the weather"}}}}},
		{Role: inferencev1.Role_ROLE_ASSISTANT, ToolCalls: []*inferencev1.ToolCall{{Id: "call_1", Name: "get_weather", Arguments: `{"city":"Oslo"}`}}},
		{Role: inferencev1.Role_ROLE_TOOL, ToolCallId: "call_1", Content: &inferencev1.Message_Text{Text: "sunny"}},
		user("thanks, and tomorrow?"),
	}
	tools := []*inferencev1.Tool{{Name: "get_weather", Description: "weather of a city", ParametersJson: `{"type":"object","properties":{"city":{"type":"string"}}}`}}
	evs, err := collect(t, e, &inferencev1.ChatCompletionRequest{Model: chatMdl, Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	_, last := reply(t, evs)
	withTools, err := e.CountTokens(t.Context(), &inferencev1.CountTokensRequest{Model: chatMdl, Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if withTools.GetPromptTokens() != last.GetUsage().GetPromptTokens() {
		t.Errorf("CountTokens %d, usage.prompt_tokens %d", withTools.GetPromptTokens(), last.GetUsage().GetPromptTokens())
	}
	without, err := e.CountTokens(t.Context(), &inferencev1.CountTokensRequest{Model: chatMdl, Messages: msgs})
	if err != nil || without.GetPromptTokens() >= withTools.GetPromptTokens() {
		t.Errorf("without tools %d (%v), with %d: tools must count", without.GetPromptTokens(), err, withTools.GetPromptTokens())
	}
}

func TestToolCalls(t *testing.T) {
	e, srv := newEngine(t, vllm.Config{})
	tools := []*inferencev1.Tool{{Name: "get_weather", ParametersJson: `{"type":"object"}`}}
	cases := []struct {
		name   string
		choice *inferencev1.ToolChoice
		finish inferencev1.FinishReason
	}{
		{"auto", nil, inferencev1.FinishReason_FINISH_REASON_TOOL_CALLS},
		// vLLM, like OpenAI, finishes a forced named call with stop.
		{"named", &inferencev1.ToolChoice{Mode: inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_FUNCTION, FunctionName: "get_weather"}, inferencev1.FinishReason_FINISH_REASON_STOP},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := collect(t, e, &inferencev1.ChatCompletionRequest{
				Model: chatMdl, Messages: []*inferencev1.Message{user(`/tool get_weather {"city":"Oslo"}`)}, Tools: tools, ToolChoice: tc.choice,
			})
			if err != nil {
				t.Fatal(err)
			}
			text, last := reply(t, evs)
			if last.GetFinishReason() != tc.finish {
				t.Errorf("finish %v", last.GetFinishReason())
			}
			var pieces []*inferencev1.ToolCallDelta
			for _, ev := range evs {
				pieces = append(pieces, ev.GetToolCalls()...)
			}
			if len(pieces) == 0 {
				t.Fatalf("no tool call; text %q", text)
			}
			// The edge's rule: the first piece of a call carries its id and
			// name; later pieces only arguments, and none is empty.
			if p := pieces[0]; p.GetIndex() != 0 || !strings.HasPrefix(p.GetId(), "chatcmpl-tool-") || p.GetName() != "get_weather" {
				t.Errorf("first piece %v", p)
			}
			var args strings.Builder
			for i, p := range pieces {
				if i > 0 && (p.GetId() != "" || p.GetName() != "" || p.GetArguments() == "") {
					t.Errorf("piece %d: %v", i, p)
				}
				args.WriteString(p.GetArguments())
			}
			var v map[string]string
			if err := json.Unmarshal([]byte(args.String()), &v); err != nil || v["city"] != "Oslo" {
				t.Errorf("arguments %q: %v", args.String(), err)
			}
		})
	}
	sent := srv.Requests("/v1/chat/completions")
	if !strings.Contains(string(sent[len(sent)-1]), `"tool_choice":{"type":"function","function":{"name":"get_weather"}}`) {
		t.Errorf("sent %s", sent[len(sent)-1])
	}
}

// A tool_choice of "none" or "auto" with no tool left (a policy removed
// every tool the client offered) is a plain reply: vLLM refuses any
// tool_choice but "none" without tools, so it is left out. "required"
// with no tool is still sent, and refused by the server.
func TestToolChoiceWithoutTools(t *testing.T) {
	e, srv := newEngine(t, vllm.Config{})
	for _, tc := range []struct {
		mode inferencev1.ToolChoiceMode
		code codes.Code // of the completion's error; OK for a reply
	}{
		{inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_AUTO, codes.OK},
		{inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_NONE, codes.OK},
		{inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED, codes.InvalidArgument},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			evs, err := collect(t, e, &inferencev1.ChatCompletionRequest{
				Model: chatMdl, Messages: []*inferencev1.Message{user("hello world")}, ToolChoice: &inferencev1.ToolChoice{Mode: tc.mode},
			})
			if status.Code(err) != tc.code {
				t.Fatalf("err %v, want %v", err, tc.code)
			}
			sent := srv.Requests("/v1/chat/completions")
			body := string(sent[len(sent)-1])
			if tc.code != codes.OK {
				if !strings.Contains(body, `"tool_choice":"required"`) {
					t.Errorf("sent %s", body)
				}
				return
			}
			if text, _ := reply(t, evs); text != "hello world" {
				t.Errorf("reply %q", text)
			}
			if strings.Contains(body, "tool_choice") || strings.Contains(body, `"tools"`) {
				t.Errorf("sent %s", body)
			}
		})
	}
}

// response_format goes to the server, which constrains the reply.
func TestResponseFormatForwarded(t *testing.T) {
	e, srv := newEngine(t, vllm.Config{})
	evs, err := collect(t, e, &inferencev1.ChatCompletionRequest{
		Model: chatMdl, Messages: []*inferencev1.Message{user("hi there")},
		ResponseFormat: &inferencev1.ResponseFormat{
			Type:       inferencev1.ResponseFormatType_RESPONSE_FORMAT_TYPE_JSON_SCHEMA,
			JsonSchema: &inferencev1.JSONSchema{Name: "reply", SchemaJson: `{"type":"object"}`, Strict: proto.Bool(true)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	text, _ := reply(t, evs)
	var v map[string]any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Errorf("reply %q is not a JSON object: %v", text, err)
	}
	sent := srv.Requests("/v1/chat/completions")
	if !strings.Contains(string(sent[0]), `"response_format":{"type":"json_schema","json_schema":{"name":"reply","schema":{"type":"object"},"strict":true}}`) {
		t.Errorf("sent %s", sent[0])
	}
}

func TestErrors(t *testing.T) {
	e, srv := newEngine(t, vllm.Config{})
	req := &inferencev1.ChatCompletionRequest{Model: chatMdl, Messages: []*inferencev1.Message{user("one two three four")}}
	cases := []struct {
		name   string
		arm    func()
		model  string
		code   codes.Code
		events int // events before the error
		msg    string
	}{
		{"not listed", func() {}, "gpu/other", codes.NotFound, 0, "not loaded"},
		{"refused", func() { srv.FailNext("/v1/chat/completions", http.StatusBadRequest, "prompt too long for the context") }, chatMdl, codes.InvalidArgument, 0, "prompt too long for the context"},
		{"gone", func() { srv.FailNext("/v1/chat/completions", http.StatusNotFound, "The model does not exist.") }, chatMdl, codes.NotFound, 0, "not loaded"},
		{"busy", func() { srv.FailNext("/v1/chat/completions", http.StatusServiceUnavailable, "starting") }, chatMdl, codes.Unavailable, 0, "busy"},
		{"failed", func() { srv.FailNext("/v1/chat/completions", http.StatusInternalServerError, "CUDA out of memory") }, chatMdl, codes.Internal, 0, "500"},
		{"broken mid-stream", func() { srv.BreakStreamAfter(2) }, chatMdl, codes.Internal, 2, "failed the completion"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.arm()
			r := proto.Clone(req).(*inferencev1.ChatCompletionRequest)
			r.Model = tc.model
			evs, err := collect(t, e, r)
			if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.msg) || len(evs) != tc.events {
				t.Errorf("err %v after %d events; want %v containing %q after %d", err, len(evs), tc.code, tc.msg, tc.events)
			}
		})
	}
	if _, err := e.Embed(t.Context(), &inferencev1.EmbedRequest{Model: chatMdl, Inputs: []*inferencev1.EmbedInput{{Input: &inferencev1.EmbedInput_Text{Text: "x"}}}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("embeddings of a chat model: %v", err)
	}
}

func TestServerUnreachable(t *testing.T) {
	e, err := vllm.New(vllm.Config{Namespace: "gpu", URL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Refresh(t.Context()); status.Code(err) != codes.Unavailable {
		t.Errorf("refresh: %v", err)
	}
	if len(e.Models()) != 0 {
		t.Errorf("models %v", e.Models())
	}
}

func TestAPIKey(t *testing.T) {
	srv := vllmfake.Start(t)
	srv.SetAPIKey("s3cret")
	for _, tc := range []struct {
		key  string
		code codes.Code
	}{{"s3cret", codes.OK}, {"wrong", codes.Internal}} {
		e, err := vllm.New(vllm.Config{Namespace: "gpu", URL: srv.URL, APIKey: tc.key})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Refresh(t.Context()); status.Code(err) != tc.code {
			t.Errorf("key %q: %v", tc.key, err)
		}
	}
}

// A caller that stops taking events ends the server's stream.
func TestCallerStops(t *testing.T) {
	e, _ := newEngine(t, vllm.Config{})
	stop := errors.New("client gone")
	n := 0
	err := e.ChatCompletion(context.Background(), &inferencev1.ChatCompletionRequest{Model: chatMdl, Messages: []*inferencev1.Message{user("a b c d e f")}},
		func(*inferencev1.ChatCompletionResponse) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("err %v after %d events", err, n)
	}
}

func TestEmbeddings(t *testing.T) {
	e, srv := newEngine(t, vllm.Config{Namespace: "emb", Embedding: true}, vllmfake.Model{ID: embedID, Embedding: true})
	text := func(s string) *inferencev1.EmbedInput {
		return &inferencev1.EmbedInput{Input: &inferencev1.EmbedInput_Text{Text: s}}
	}
	ids := func(v ...int64) *inferencev1.EmbedInput {
		return &inferencev1.EmbedInput{Input: &inferencev1.EmbedInput_Tokens{Tokens: &inferencev1.TokenIDs{Ids: v}}}
	}
	resp, err := e.Embed(t.Context(), &inferencev1.EmbedRequest{Model: embMdl, Inputs: []*inferencev1.EmbedInput{text("hello world"), text("bye")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetEmbeddings()) != 2 || len(resp.GetEmbeddings()[0].GetValues()) != vllmfake.EmbeddingDim || resp.GetUsage().GetPromptTokens() == 0 {
		t.Fatalf("resp %v", resp)
	}
	resp, err = e.Embed(t.Context(), &inferencev1.EmbedRequest{Model: embMdl, Inputs: []*inferencev1.EmbedInput{ids(1, 2, 3)}, Dimensions: 8})
	if err != nil {
		t.Fatal(err)
	}
	want := vllmfake.Embedding([]int{1, 2, 3}, 8)
	got := resp.GetEmbeddings()[0].GetValues()
	if len(got) != len(want) || resp.GetUsage().GetPromptTokens() != 3 {
		t.Fatalf("got %v usage %v, want %v", got, resp.GetUsage(), want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("value %d: %v, want %v", i, got[i], want[i])
		}
	}
	sent := srv.Requests("/v1/embeddings")
	if !strings.Contains(string(sent[1]), `"input":[[1,2,3]],"dimensions":8,"encoding_format":"float"`) {
		t.Errorf("sent %s", sent[1])
	}
	if _, err := e.Embed(t.Context(), &inferencev1.EmbedRequest{Model: embMdl, Inputs: []*inferencev1.EmbedInput{text("a"), ids(1)}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("mixed inputs: %v", err)
	}
}

// Sampling settings reach the server as OpenAI names them.
func TestSamplingForwarded(t *testing.T) {
	e, srv := newEngine(t, vllm.Config{})
	_, err := collect(t, e, &inferencev1.ChatCompletionRequest{
		Model: chatMdl, Messages: []*inferencev1.Message{user("hi")},
		Temperature: proto.Float64(0.5), TopP: proto.Float64(0.9), Seed: proto.Int64(7), MaxTokens: proto.Int64(20),
		FrequencyPenalty: proto.Float64(0.5), PresencePenalty: proto.Float64(-1), LogitBias: map[int64]int32{50256: -100},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `"temperature":0.5,"top_p":0.9,"max_tokens":20,"seed":7,"frequency_penalty":0.5,"presence_penalty":-1,"logit_bias":{"50256":-100}`
	if sent := string(srv.Requests("/v1/chat/completions")[0]); !strings.Contains(sent, want) {
		t.Errorf("sent %s\nwant it to hold %s", sent, want)
	}
}

// Completions reuse the connection: the stream is read to its end.
func TestConnectionReused(t *testing.T) {
	var dials atomic.Int32
	dialer := &net.Dialer{}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return dialer.DialContext(ctx, network, addr)
	}}}
	e, _ := newEngine(t, vllm.Config{Client: client})
	for range 3 {
		if _, err := collect(t, e, &inferencev1.ChatCompletionRequest{Model: chatMdl, Messages: []*inferencev1.Message{user("a b c")}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("%d connections for a model list and three completions, want 1", n)
	}
}

// A reasoning model's thinking comes as reasoning events before the
// content, counted in completion_tokens; an earlier turn's reasoning is
// sent back, and counted in the prompt alike by /tokenize and the
// completion.
func TestReasoning(t *testing.T) {
	e, srv := newEngine(t, vllm.Config{}, vllmfake.Model{ID: chatID, Reasoning: true})
	msgs := []*inferencev1.Message{
		user("hi"),
		{Role: inferencev1.Role_ROLE_ASSISTANT, Content: &inferencev1.Message_Text{Text: "hi"}, Reasoning: "Say hi."},
		user("hello big world"),
	}
	evs, err := collect(t, e, &inferencev1.ChatCompletionRequest{Model: chatMdl, Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	text, last := reply(t, evs)
	var reasoning strings.Builder
	contentStarted := false
	for _, ev := range evs {
		if ev.GetReasoning() != "" {
			if contentStarted {
				t.Fatalf("reasoning after content: %v", evs)
			}
			reasoning.WriteString(ev.GetReasoning())
		}
		if ev.GetContent() != "" {
			contentStarted = true
		}
	}
	// Six words of thinking, the closing tag, three words and EOS.
	if reasoning.String() != vllmfake.FakeReasoning || text != "hello big world" || last.GetUsage().GetCompletionTokens() != 6+1+3+1 {
		t.Fatalf("reasoning %q, text %q, usage %v", reasoning.String(), text, last.GetUsage())
	}
	n, err := e.CountTokens(t.Context(), &inferencev1.CountTokensRequest{Model: chatMdl, Messages: msgs})
	if err != nil || n.GetPromptTokens() != last.GetUsage().GetPromptTokens() {
		t.Fatalf("CountTokens %v (%v), usage.prompt_tokens %d", n, err, last.GetUsage().GetPromptTokens())
	}
	if sent := srv.Requests("/v1/chat/completions")[0]; !strings.Contains(string(sent), `"content":"hi","reasoning":"Say hi."}`) {
		t.Errorf("the earlier turn's reasoning was not sent back: %s", sent)
	}

	// A server from before vLLM's rename sends reasoning_content only.
	old := vllmfake.Start(t, vllmfake.Model{ID: chatID, Reasoning: true})
	old.SetReasoningField("reasoning_content")
	eo, err := vllm.New(vllm.Config{Namespace: "old", URL: old.URL})
	if err != nil {
		t.Fatal(err)
	}
	if err := eo.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	evs, err = collect(t, eo, &inferencev1.ChatCompletionRequest{Model: "old/" + chatID, Messages: []*inferencev1.Message{user("x")}})
	if err != nil {
		t.Fatal(err)
	}
	reasoning.Reset()
	for _, ev := range evs {
		reasoning.WriteString(ev.GetReasoning())
	}
	if reasoning.String() != vllmfake.FakeReasoning {
		t.Fatalf("reasoning from reasoning_content: %q", reasoning.String())
	}
}

// chat_template_kwargs reach the completion and /tokenize alike, so that
// the count still matches a prompt they change: enable_thinking false
// closes a Qwen3-style model's thinking in the prompt, and it answers
// without reasoning.
func TestChatTemplateKwargs(t *testing.T) {
	e, srv := newEngine(t, vllm.Config{}, vllmfake.Model{ID: chatID, Reasoning: true})
	msgs := []*inferencev1.Message{user("hello big world")}
	const kwargs = `{"enable_thinking":false}`
	evs, err := collect(t, e, &inferencev1.ChatCompletionRequest{Model: chatMdl, Messages: msgs, ChatTemplateKwargsJson: kwargs})
	if err != nil {
		t.Fatal(err)
	}
	text, last := reply(t, evs)
	for _, ev := range evs {
		if ev.GetReasoning() != "" {
			t.Fatalf("reasoning with thinking off: %v", evs)
		}
	}
	if text != "hello big world" || last.GetUsage().GetCompletionTokens() != 4 {
		t.Fatalf("text %q, usage %v", text, last.GetUsage())
	}
	with, err := e.CountTokens(t.Context(), &inferencev1.CountTokensRequest{Model: chatMdl, Messages: msgs, ChatTemplateKwargsJson: kwargs})
	if err != nil || with.GetPromptTokens() != last.GetUsage().GetPromptTokens() {
		t.Fatalf("CountTokens %v (%v), usage.prompt_tokens %d", with, err, last.GetUsage().GetPromptTokens())
	}
	without, err := e.CountTokens(t.Context(), &inferencev1.CountTokensRequest{Model: chatMdl, Messages: msgs})
	if err != nil || without.GetPromptTokens() >= with.GetPromptTokens() {
		t.Fatalf("without the options %v (%v), with %d: they change the prompt", without, err, with.GetPromptTokens())
	}
	for _, path := range []string{"/v1/chat/completions", "/tokenize"} {
		if sent := srv.Requests(path)[0]; !strings.Contains(string(sent), `"chat_template_kwargs":`+kwargs) {
			t.Errorf("%s sent %s", path, sent)
		}
	}
}

// reasoning_effort is sent with the completion, and /tokenize, which has
// no such field, gets what vLLM's completion makes of it in the template's
// arguments: the effort, and enable_thinking (false for "none") unless the
// client's chat_template_kwargs set it. The count is then the completion's
// prompt_tokens for every effort, and differs from the count without one,
// so an effort left out of the count would show.
func TestReasoningEffort(t *testing.T) {
	e, srv := newEngine(t, vllm.Config{}, vllmfake.Model{ID: chatID, Reasoning: true})
	msgs := []*inferencev1.Message{user("hello big world")}
	without, err := e.CountTokens(t.Context(), &inferencev1.CountTokensRequest{Model: chatMdl, Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		effort, kwargs string
		thinks         bool
		sentKwargs     string // chat_template_kwargs sent to /tokenize
	}{
		{"none", "", false, `{"enable_thinking":false,"reasoning_effort":"none"}`},
		{"minimal", "", true, `{"enable_thinking":true,"reasoning_effort":"minimal"}`},
		{"low", "", true, `{"enable_thinking":true,"reasoning_effort":"low"}`},
		{"medium", "", true, `{"enable_thinking":true,"reasoning_effort":"medium"}`},
		{"high", "", true, `{"enable_thinking":true,"reasoning_effort":"high"}`},
		{"xhigh", "", true, `{"enable_thinking":true,"reasoning_effort":"xhigh"}`},
		{"max", "", true, `{"enable_thinking":true,"reasoning_effort":"max"}`},
		// The client's enable_thinking wins over the effort's, both ways.
		{"none", `{"enable_thinking":true}`, true, `{"enable_thinking":true,"reasoning_effort":"none"}`},
		{"high", `{"enable_thinking":false}`, false, `{"enable_thinking":false,"reasoning_effort":"high"}`},
		// DeepSeek's switch is not enable_thinking: the effort still sets it.
		{"none", `{"thinking":true}`, false, `{"enable_thinking":false,"reasoning_effort":"none","thinking":true}`},
	}
	for i, tc := range cases {
		t.Run(tc.effort+tc.kwargs, func(t *testing.T) {
			effort := tc.effort
			evs, err := collect(t, e, &inferencev1.ChatCompletionRequest{Model: chatMdl, Messages: msgs, ChatTemplateKwargsJson: tc.kwargs, ReasoningEffort: &effort})
			if err != nil {
				t.Fatal(err)
			}
			text, last := reply(t, evs)
			thinks := false
			for _, ev := range evs {
				thinks = thinks || ev.GetReasoning() != ""
			}
			if text != "hello big world" || thinks != tc.thinks {
				t.Fatalf("text %q, reasoning %v; want thinking %v", text, thinks, tc.thinks)
			}
			n, err := e.CountTokens(t.Context(), &inferencev1.CountTokensRequest{Model: chatMdl, Messages: msgs, ChatTemplateKwargsJson: tc.kwargs, ReasoningEffort: &effort})
			if err != nil || n.GetPromptTokens() != last.GetUsage().GetPromptTokens() {
				t.Fatalf("CountTokens %v (%v), usage.prompt_tokens %d", n, err, last.GetUsage().GetPromptTokens())
			}
			if n.GetPromptTokens() <= without.GetPromptTokens() {
				t.Errorf("count %d with the effort, %d without: it changes the prompt", n.GetPromptTokens(), without.GetPromptTokens())
			}
			chat := string(srv.Requests("/v1/chat/completions")[i])
			wantChat := `"reasoning_effort":"` + tc.effort + `","stream":true`
			if tc.kwargs != "" {
				wantChat = `"chat_template_kwargs":` + tc.kwargs + `,` + wantChat
			}
			if !strings.Contains(chat, wantChat) {
				t.Errorf("completion sent %s, want %s", chat, wantChat)
			}
			tok := string(srv.Requests("/tokenize")[i+1])
			if !strings.Contains(tok, `"chat_template_kwargs":`+tc.sentKwargs+`,`) || strings.Count(tok, `"reasoning_effort"`) != 1 {
				t.Errorf("/tokenize sent %s, want chat_template_kwargs %s", tok, tc.sentKwargs)
			}
		})
	}

	// The client's options are merged, so they must be an object.
	high := "high"
	if _, err := e.CountTokens(t.Context(), &inferencev1.CountTokensRequest{Model: chatMdl, Messages: msgs, ChatTemplateKwargsJson: `[true]`, ReasoningEffort: &high}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("chat_template_kwargs an array: %v", err)
	}
}
