package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tollgate-dev/tollgate/server/inference"
	"github.com/tollgate-dev/tollgate/server/inference/vllm"
	"github.com/tollgate-dev/tollgate/server/inference/vllm/vllmfake"
)

const (
	gpuModel   = "gpu/meta-llama/Llama-3.1-8B-Instruct"
	embedModel = "emb/intfloat/e5-small"
)

// vllmStack is an appliance in front of two (fake) vLLM servers: a chat
// model under gpu/ and an embedding model under emb/.
func vllmStack(t *testing.T) (*stack, *vllmfake.Server) {
	t.Helper()
	chat := vllmfake.Start(t, vllmfake.Model{ID: "meta-llama/Llama-3.1-8B-Instruct"})
	emb := vllmfake.Start(t, vllmfake.Model{ID: "intfloat/e5-small", Embedding: true})
	var engines []inference.Engine
	for _, cfg := range []vllm.Config{
		{Namespace: "gpu", URL: chat.URL},
		{Namespace: "emb", URL: emb.URL, Embedding: true},
	} {
		e, err := vllm.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		engines = append(engines, e)
	}
	return startStack(t, engines...), chat
}

func TestVLLMModelsListed(t *testing.T) {
	s, _ := vllmStack(t)
	page, err := client(s.base, allKey).Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	want := []string{"builtin/echo", "builtin/embed", embedModel, gpuModel}
	if !slices.Equal(ids, want) {
		t.Fatalf("models %v, want %v", ids, want)
	}
	// An id with more than one slash is still one model.
	m, err := client(s.base, allKey).Models.Get(context.Background(), gpuModel)
	if err != nil || m.ID != gpuModel || m.OwnedBy != "vllm" {
		t.Fatalf("get %s: %+v %v", gpuModel, m, err)
	}
}

// A reply from the model server reaches the SDK as OpenAI's, and its audit
// event holds the server's own token counts.
func TestVLLMChat(t *testing.T) {
	s, srv := vllmStack(t)
	c, err := client(s.base, allKey).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:            gpuModel,
		Messages:         []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("hello big world")},
		FrequencyPenalty: openai.Float(0.5),
		LogitBias:        map[string]int64{"50256": -100},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Choices) != 1 || c.Choices[0].Message.Content != "hello big world" || c.Choices[0].FinishReason != "stop" ||
		c.Model != gpuModel || c.Usage.CompletionTokens != 4 || c.Usage.PromptTokens == 0 {
		t.Fatalf("completion %+v", c)
	}
	rec, err := s.audit.Event(c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Leaf.PromptTokens != c.Usage.PromptTokens || rec.Leaf.CompletionTokens != 4 || rec.Leaf.Model != gpuModel {
		t.Errorf("leaf %+v", rec.Leaf)
	}
	// The key has a TPD limit, so the prompt was counted first with the
	// server's /tokenize; then the completion, a plain reply, was asked
	// of the server whole (not streamed), with its usage.
	if n := len(srv.Requests("/tokenize")); n != 1 {
		t.Errorf("%d /tokenize calls", n)
	}
	var sent map[string]any
	if err := json.Unmarshal(srv.Requests("/v1/chat/completions")[0], &sent); err != nil || sent["stream"] != false ||
		sent["frequency_penalty"] != 0.5 || fmt.Sprint(sent["logit_bias"]) != "map[50256:-100]" {
		t.Errorf("sent %v (%v)", sent, err)
	}
}

func TestVLLMStreamedToolCall(t *testing.T) {
	s, _ := vllmStack(t)
	stream := client(s.base, allKey).Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:    gpuModel,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(`/tool get_weather {"city":"Oslo"}`)},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:       "get_weather",
			Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
		})},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].FinishReason != "tool_calls" || len(acc.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("accumulated %+v", acc.ChatCompletion)
	}
	call := acc.Choices[0].Message.ToolCalls[0]
	var args map[string]string
	if err := json.Unmarshal([]byte(call.Function.Arguments), &args); err != nil || call.Function.Name != "get_weather" || args["city"] != "Oslo" || call.ID == "" {
		t.Errorf("call %+v (%v)", call, err)
	}
	if acc.Usage.PromptTokens == 0 || acc.Usage.CompletionTokens == 0 {
		t.Errorf("usage %+v", acc.Usage)
	}
}

func TestVLLMJSONMode(t *testing.T) {
	s, _ := vllmStack(t)
	c, err := client(s.base, allKey).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    gpuModel,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("answer in JSON")},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{
			OfJSONObject: &shared.ResponseFormatJSONObjectParam{},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(c.Choices[0].Message.Content), &v); err != nil {
		t.Errorf("content %q is not a JSON object: %v", c.Choices[0].Message.Content, err)
	}
}

// What the model server refuses is the client's 400, with its words.
func TestVLLMRefusal(t *testing.T) {
	s, srv := vllmStack(t)
	srv.FailNext("/v1/chat/completions", http.StatusBadRequest, "This model's maximum context length is 8192 tokens.")
	_, err := client(s.base, allKey).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    gpuModel,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("too long")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Code != "invalid_request" ||
		apiErr.Message != "This model's maximum context length is 8192 tokens." {
		t.Fatalf("err %v", err)
	}
}

func TestVLLMEmbeddings(t *testing.T) {
	s, _ := vllmStack(t)
	resp, err := client(s.base, allKey).Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model: embedModel,
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"hello world", "bye"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Data) != 2 || len(resp.Data[1].Embedding) != vllmfake.EmbeddingDim || resp.Data[1].Index != 1 || resp.Usage.PromptTokens == 0 {
		t.Fatalf("embeddings %+v", resp)
	}
}

// An embeddings request reserves room for the special tokens the server
// adds to each input (BOS on this one; [CLS] and [SEP] on BERT-style
// models): 40 inputs of one byte cost 80 tokens here, more than the key's
// 64 a day, so the request is refused before it runs rather than taking
// the day past its limit.
func TestVLLMEmbeddingsReserveSpecialTokens(t *testing.T) {
	s, _ := vllmStack(t)
	const smallDayKey = "tgk_test_acme_small_day" // 64 tokens a day
	embed := func(inputs []string) (*openai.CreateEmbeddingResponse, error) {
		return client(s.base, smallDayKey).Embeddings.New(context.Background(), openai.EmbeddingNewParams{
			Model: embedModel,
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: inputs},
		})
	}
	_, err := embed(slices.Repeat([]string{"a"}, 40))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("40 inputs against 64 tokens a day: %v", err)
	}
	resp, err := embed([]string{"a", "b"})
	if err != nil || resp.Usage.PromptTokens != 4 {
		t.Fatalf("two inputs that fit: %+v %v", resp, err)
	}
}

// A request without max_tokens on a model whose context is smaller than
// the prompt plus the default reserve is capped at what the context has
// room for, not refused by the server for asking too much.
func TestVLLMSmallContext(t *testing.T) {
	srv := vllmfake.Start(t, vllmfake.Model{ID: "tiny", MaxModelLen: 64})
	e, err := vllm.New(vllm.Config{Namespace: "gpu", URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	s := startStack(t, e)
	c, err := client(s.base, allKey).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "gpu/tiny",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello big world")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Choices[0].Message.Content != "hello big world" {
		t.Errorf("reply %q", c.Choices[0].Message.Content)
	}
	var sent struct {
		MaxTokens int64 `json:"max_tokens"`
	}
	if err := json.Unmarshal(srv.Requests("/v1/chat/completions")[0], &sent); err != nil || sent.MaxTokens != 64-c.Usage.PromptTokens {
		t.Errorf("max_tokens sent %d (%v), want the context's room %d", sent.MaxTokens, err, 64-c.Usage.PromptTokens)
	}
}

// A reasoning model's reasoning reaches the SDK as the message's (and each
// delta's) `reasoning` field, which openai-go keeps as an extra field; an
// earlier turn's reasoning sent back reaches the model server; the
// reasoning's tokens are charged and audited with the completion's.
func TestVLLMReasoning(t *testing.T) {
	think := vllmfake.Start(t, vllmfake.Model{ID: "Qwen/Qwen3-8B", Reasoning: true})
	e, err := vllm.New(vllm.Config{Namespace: "think", URL: think.URL})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	s := startStack(t, e)
	params := openai.ChatCompletionNewParams{
		Model: "think/Qwen/Qwen3-8B",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage("hi"), openai.AssistantMessage("hi"), openai.UserMessage("hello big world"),
		},
	}
	back := option.WithJSONSet("messages.1.reasoning", "Say hi.")
	wantReasoning, _ := json.Marshal(vllmfake.FakeReasoning)

	c, err := client(s.base, allKey).Chat.Completions.New(context.Background(), params, back)
	if err != nil {
		t.Fatal(err)
	}
	msg := c.Choices[0].Message
	if msg.Content != "hello big world" || msg.JSON.ExtraFields["reasoning"].Raw() != string(wantReasoning) ||
		c.Usage.CompletionTokens != 6+1+3+1 {
		t.Fatalf("message %q, reasoning %s, usage %+v", msg.Content, msg.JSON.ExtraFields["reasoning"].Raw(), c.Usage)
	}
	rec, err := s.audit.Event(c.ID)
	if err != nil || rec.Leaf.CompletionTokens != c.Usage.CompletionTokens {
		t.Fatalf("audit %+v, %v", rec, err)
	}
	if sent := think.Requests("/v1/chat/completions")[0]; !strings.Contains(string(sent), `"reasoning":"Say hi."`) {
		t.Errorf("the earlier turn's reasoning did not reach the server: %s", sent)
	}

	stream := client(s.base, allKey).Chat.Completions.NewStreaming(context.Background(), params, back)
	var reasoning, content strings.Builder
	var acc openai.ChatCompletionAccumulator // as SDK users fold a stream
	for stream.Next() {
		ch := stream.Current()
		if !acc.AddChunk(ch) {
			t.Fatalf("the SDK's accumulator refused chunk %s", ch.RawJSON())
		}
		if len(ch.Choices) == 0 {
			continue
		}
		d := ch.Choices[0].Delta
		if raw := d.JSON.ExtraFields["reasoning"].Raw(); raw != "" {
			if content.Len() > 0 {
				t.Fatal("reasoning after content")
			}
			var piece string
			if err := json.Unmarshal([]byte(raw), &piece); err != nil {
				t.Fatal(err)
			}
			reasoning.WriteString(piece)
		}
		content.WriteString(d.Content)
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if reasoning.String() != vllmfake.FakeReasoning || content.String() != "hello big world" {
		t.Fatalf("streamed reasoning %q, content %q", reasoning.String(), content.String())
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "hello big world" || acc.Choices[0].FinishReason != "stop" {
		t.Fatalf("accumulated %+v", acc.ChatCompletion)
	}

	// chat_template_kwargs reach the server's completion and /tokenize
	// alike: thinking off, no reasoning, and the prompt counted for the
	// key's reservation is the one the server used.
	c, err = client(s.base, allKey).Chat.Completions.New(context.Background(), params, back,
		option.WithJSONSet("chat_template_kwargs", map[string]any{"enable_thinking": false}))
	if err != nil {
		t.Fatal(err)
	}
	if raw := c.Choices[0].Message.JSON.ExtraFields["reasoning"].Raw(); raw != "" || c.Usage.CompletionTokens != 4 {
		t.Fatalf("thinking off: reasoning %s, usage %+v", raw, c.Usage)
	}
	toks := think.Requests("/tokenize")
	if last := toks[len(toks)-1]; !strings.Contains(string(last), `"chat_template_kwargs":{"enable_thinking":false}`) {
		t.Errorf("/tokenize sent %s", last)
	}

	// reasoning_effort, openai-go's typed field, reaches the server's
	// completion, and /tokenize gets the template arguments the completion
	// makes of it, so the prompt counted for the key's reservation is the
	// one the server used; "none" turns the thinking off.
	for _, effort := range []shared.ReasoningEffort{shared.ReasoningEffortNone, shared.ReasoningEffortHigh, shared.ReasoningEffortMax} {
		p := params
		p.ReasoningEffort = effort
		c, err = client(s.base, allKey).Chat.Completions.New(context.Background(), p, back)
		if err != nil {
			t.Fatal(err)
		}
		thinks := effort != shared.ReasoningEffortNone
		if raw := c.Choices[0].Message.JSON.ExtraFields["reasoning"].Raw(); (raw != "") != thinks {
			t.Errorf("%s: reasoning %s", effort, raw)
		}
		chats, toks := think.Requests("/v1/chat/completions"), think.Requests("/tokenize")
		if last := chats[len(chats)-1]; !strings.Contains(string(last), `"reasoning_effort":"`+string(effort)+`"`) {
			t.Errorf("%s: the completion was sent %s", effort, last)
		}
		var counted struct {
			Messages           []json.RawMessage `json:"messages"`
			ChatTemplateKwargs map[string]any    `json:"chat_template_kwargs"`
		}
		if err := json.Unmarshal(toks[len(toks)-1], &counted); err != nil {
			t.Fatal(err)
		}
		if counted.ChatTemplateKwargs["reasoning_effort"] != string(effort) || counted.ChatTemplateKwargs["enable_thinking"] != thinks {
			t.Errorf("%s: /tokenize was sent %s", effort, toks[len(toks)-1])
		}
		if ids, _ := vllmfake.Tokenize(vllmfake.Template(counted.Messages, nil, true, counted.ChatTemplateKwargs)); int64(len(ids)) != c.Usage.PromptTokens {
			t.Errorf("%s: counted %d prompt tokens, the completion has %d", effort, len(ids), c.Usage.PromptTokens)
		}
	}

	var apiErr *openai.Error
	_, err = client(s.base, allKey).Chat.Completions.New(context.Background(), params, option.WithJSONSet("reasoning_effort", "extreme"))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "reasoning_effort" {
		t.Fatalf("reasoning_effort extreme: %v", err)
	}

	// Reasoning belongs to assistant turns only.
	_, err = client(s.base, allKey).Chat.Completions.New(context.Background(), params, option.WithJSONSet("messages.0.reasoning", "x"))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "messages[0].reasoning" {
		t.Fatalf("reasoning on a user message: %v", err)
	}
}
