package vllm_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/inference/vllm"
	"github.com/tollgate-dev/tollgate/server/inference/vllm/vllmfake"
)

// everyField is a chat request that sets everything the engine sends.
func everyField() *inferencev1.ChatCompletionRequest {
	return &inferencev1.ChatCompletionRequest{
		Model: chatMdl,
		Messages: []*inferencev1.Message{
			{Role: inferencev1.Role_ROLE_DEVELOPER, Content: &inferencev1.Message_Text{Text: "be <brief> & exact"}},
			{Role: inferencev1.Role_ROLE_USER, Name: "ann", Content: &inferencev1.Message_Parts{Parts: &inferencev1.ContentParts{Parts: []*inferencev1.ContentPart{{Text: "what is"}, {Text: "the weather\n\"here\" é 🙂"}}}}},
			{Role: inferencev1.Role_ROLE_ASSISTANT, Reasoning: "They want weather.", ToolCalls: []*inferencev1.ToolCall{{Id: "call_1", Name: "get_weather", Arguments: `{"city":"Oslo"}`}}},
			{Role: inferencev1.Role_ROLE_TOOL, ToolCallId: "call_1", Content: &inferencev1.Message_Text{Text: "sunny"}},
			user("thanks"),
		},
		Tools: []*inferencev1.Tool{
			{Name: "get_weather", Description: "weather of a city", ParametersJson: `{"type":"object","properties":{"city":{"type":"string"}}}`, Strict: proto.Bool(true)},
			{Name: "noop"},
		},
		ToolChoice:             &inferencev1.ToolChoice{Mode: inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_FUNCTION, FunctionName: "get_weather"},
		Temperature:            proto.Float64(0.25),
		TopP:                   proto.Float64(0.9),
		MaxTokens:              proto.Int64(20),
		Stop:                   []string{"END", "<stop>"},
		Seed:                   proto.Int64(7),
		FrequencyPenalty:       proto.Float64(0.5),
		PresencePenalty:        proto.Float64(-1),
		LogitBias:              map[int64]int32{50256: -100, 7: 3, 100: 1},
		ResponseFormat:         &inferencev1.ResponseFormat{Type: inferencev1.ResponseFormatType_RESPONSE_FORMAT_TYPE_JSON_SCHEMA, JsonSchema: &inferencev1.JSONSchema{Name: "reply", Description: "a reply", SchemaJson: `{"type":"object"}`, Strict: proto.Bool(false)}},
		ChatTemplateKwargsJson: `{"enable_thinking":false}`,
		ReasoningEffort:        proto.String("high"),
	}
}

// The whole bodies the engine sends, byte for byte: member names, order,
// what is left out, and encoding/json's escaping.
func TestRequestBodies(t *testing.T) {
	e, srv := newEngine(t, vllm.Config{})
	_, _ = collect(t, e, everyField()) // the fake refuses it or not: its body is recorded either way
	_, _ = collect(t, e, &inferencev1.ChatCompletionRequest{Model: chatMdl, Messages: []*inferencev1.Message{user("hi")}})
	_, _ = collect(t, e, &inferencev1.ChatCompletionRequest{Model: chatMdl, Messages: []*inferencev1.Message{user("hi")},
		Tools: []*inferencev1.Tool{{Name: "f"}}, ToolChoice: &inferencev1.ToolChoice{Mode: inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_AUTO},
		ResponseFormat: &inferencev1.ResponseFormat{Type: inferencev1.ResponseFormatType_RESPONSE_FORMAT_TYPE_JSON_OBJECT}})
	_, _ = collect(t, e, &inferencev1.ChatCompletionRequest{Model: chatMdl, Messages: []*inferencev1.Message{user("hi")},
		ToolChoice:     &inferencev1.ToolChoice{Mode: inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED},
		ResponseFormat: &inferencev1.ResponseFormat{Type: inferencev1.ResponseFormatType_RESPONSE_FORMAT_TYPE_TEXT}})
	full := everyField()
	_, _ = e.CountTokens(t.Context(), &inferencev1.CountTokensRequest{Model: chatMdl, Messages: full.GetMessages(), Tools: full.GetTools(),
		ChatTemplateKwargsJson: full.GetChatTemplateKwargsJson(), ReasoningEffort: full.ReasoningEffort})
	_, _ = e.CountTokens(t.Context(), &inferencev1.CountTokensRequest{Model: chatMdl, Messages: []*inferencev1.Message{user("hi")}})

	const msgs = `"messages":[` +
		`{"role":"system","content":"be \u003cbrief\u003e \u0026 exact"},` +
		`{"role":"user","content":[{"type":"text","text":"what is"},{"type":"text","text":"the weather\n\"here\" é 🙂"}],"name":"ann"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}],"reasoning":"They want weather."},` +
		`{"role":"tool","content":"sunny","tool_call_id":"call_1"},` +
		`{"role":"user","content":"thanks"}]`
	const tools = `"tools":[{"type":"function","function":{"name":"get_weather","description":"weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":true}},` +
		`{"type":"function","function":{"name":"noop"}}]`
	wantChat := []string{
		`{"model":"` + chatID + `",` + msgs + `,` + tools + `,"tool_choice":{"type":"function","function":{"name":"get_weather"}},` +
			`"temperature":0.25,"top_p":0.9,"max_tokens":20,"stop":["END","\u003cstop\u003e"],"seed":7,"frequency_penalty":0.5,"presence_penalty":-1,` +
			`"logit_bias":{"100":1,"50256":-100,"7":3},` +
			`"response_format":{"type":"json_schema","json_schema":{"name":"reply","description":"a reply","schema":{"type":"object"},"strict":false}},` +
			`"chat_template_kwargs":{"enable_thinking":false},"reasoning_effort":"high","stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"` + chatID + `","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"` + chatID + `","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto",` +
			`"response_format":{"type":"json_object"},"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"` + chatID + `","messages":[{"role":"user","content":"hi"}],"tool_choice":"required",` +
			`"response_format":{"type":"text"},"stream":true,"stream_options":{"include_usage":true}}`,
	}
	wantTokenize := []string{
		`{"model":"` + chatID + `",` + msgs + `,` + tools + `,"chat_template_kwargs":{"enable_thinking":false,"reasoning_effort":"high"},"add_generation_prompt":true,"add_special_tokens":false}`,
		`{"model":"` + chatID + `","messages":[{"role":"user","content":"hi"}],"add_generation_prompt":true,"add_special_tokens":false}`,
	}
	wantBodies(t, srv.Requests("/v1/chat/completions"), wantChat)
	wantBodies(t, srv.Requests("/tokenize"), wantTokenize)

	emb, esrv := newEngine(t, vllm.Config{Namespace: "emb", Embedding: true}, vllmfake.Model{ID: embedID, Embedding: true})
	text := &inferencev1.EmbedInput{Input: &inferencev1.EmbedInput_Text{Text: "a <b>"}}
	tokens := &inferencev1.EmbedInput{Input: &inferencev1.EmbedInput_Tokens{Tokens: &inferencev1.TokenIDs{Ids: []int64{1, 2}}}}
	noTokens := &inferencev1.EmbedInput{Input: &inferencev1.EmbedInput_Tokens{Tokens: &inferencev1.TokenIDs{}}}
	_, _ = emb.Embed(t.Context(), &inferencev1.EmbedRequest{Model: embMdl, Inputs: []*inferencev1.EmbedInput{text, text}})
	_, _ = emb.Embed(t.Context(), &inferencev1.EmbedRequest{Model: embMdl, Inputs: []*inferencev1.EmbedInput{tokens, noTokens}, Dimensions: 8})
	wantBodies(t, esrv.Requests("/v1/embeddings"), []string{
		`{"model":"` + embedID + `","input":["a \u003cb\u003e","a \u003cb\u003e"],"encoding_format":"float"}`,
		`{"model":"` + embedID + `","input":[[1,2],[]],"dimensions":8,"encoding_format":"float"}`,
	})
}

func wantBodies(t *testing.T, got [][]byte, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d bodies sent, want %d", len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		if string(got[i]) != want[i] {
			t.Errorf("body %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}
