package openai

import (
	"encoding/json"
	"testing"
)

func ptr[T any](v T) *T { return &v }

// chatCompletions covers every member AppendJSON writes: null and present
// pointers, omitted and present omitempty members, several choices and
// tool calls, no choices (nil and empty), and strings with every escape.
func chatCompletions() map[string]ChatCompletion {
	call := func(id, name, args string) ToolCall {
		return ToolCall{ID: id, Type: ToolTypeFunction, Function: FunctionCall{Name: name, Arguments: args}}
	}
	cases := map[string]ChatCompletion{
		"text": {ID: "chatcmpl-req_1", Object: ObjectChatCompletion, Created: 1764288000, Model: "mock/m",
			Choices: []Choice{{Message: ResponseMessage{Role: RoleAssistant, Content: ptr("hello")}, FinishReason: "stop"}},
			Usage:   Usage{PromptTokens: 5, CompletionTokens: 2, TotalTokens: 7}},
		"tool calls alone": {ID: "x", Object: ObjectChatCompletion, Model: "a/b",
			Choices: []Choice{{Message: ResponseMessage{Role: RoleAssistant,
				ToolCalls: []ToolCall{call("call_1", "get_weather", `{"city":"Paris"}`), call("call_2", "f", "")}}, FinishReason: "tool_calls"}}},
		"everything": {ID: "<&>", Object: "o", Created: -3, Model: "m\u2028",
			Choices: []Choice{
				{Index: 0, Message: ResponseMessage{Role: "assistant", Content: ptr(""), Refusal: ptr("no \"way\""),
					ToolCalls: []ToolCall{call("c", "n", "a")}, Reasoning: "think\n", ReasoningContent: "old"}, FinishReason: "length", Logprobs: &struct{}{}},
				{Index: 1, Message: ResponseMessage{Role: "assistant"}},
			},
			Usage: Usage{PromptTokens: 1 << 40, CompletionTokens: -1, TotalTokens: 0}},
		"empty tool calls": {Choices: []Choice{{Message: ResponseMessage{ToolCalls: []ToolCall{}}}}},
		"no choices":       {Choices: []Choice{}},
		"nil choices":      {},
	}
	for i, s := range jsonStrings {
		cases["string "+string(rune('a'+i))] = ChatCompletion{ID: s, Object: s, Model: s,
			Choices: []Choice{{Message: ResponseMessage{Role: s, Content: ptr(s), Refusal: ptr(s), Reasoning: s,
				ToolCalls: []ToolCall{call(s, s, s)}}, FinishReason: s}}}
	}
	return cases
}

func TestChatCompletionAppendJSONMatchesEncodingJSON(t *testing.T) {
	for name, c := range chatCompletions() {
		want, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.AppendJSON([]byte("x")); string(got) != "x"+string(want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got[1:], want)
		}
	}
}

func FuzzChatCompletionAppendJSON(f *testing.F) {
	f.Add("chatcmpl-1", "mock/m", "hello", true, "", "", "", "", "stop", int64(1), int64(5), 0)
	f.Add("<", "\u2028", "\xff", false, "r", "think", "call_1", `{"a":1}`, "tool_calls", int64(-1), int64(1<<40), 3)
	f.Fuzz(func(t *testing.T, id, model, content string, hasContent bool, refusal, reasoning, callID, args, finish string, created, tokens int64, calls int) {
		msg := ResponseMessage{Role: RoleAssistant, Reasoning: reasoning}
		if hasContent {
			msg.Content = &content
		}
		if refusal != "" {
			msg.Refusal = &refusal
		}
		for i := range calls % 4 {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: callID, Type: ToolTypeFunction, Function: FunctionCall{Name: callID[:min(i, len(callID))], Arguments: args}})
		}
		c := ChatCompletion{ID: id, Object: ObjectChatCompletion, Created: created, Model: model,
			Choices: []Choice{{Index: calls, Message: msg, FinishReason: finish}},
			Usage:   Usage{PromptTokens: tokens, CompletionTokens: created, TotalTokens: tokens + created}}
		want, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.AppendJSON(nil); string(got) != string(want) {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	})
}

func BenchmarkChatCompletionJSON(b *testing.B) {
	c := chatCompletions()["text"]
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(c)
		}
	})
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = c.AppendJSON(make([]byte, 0, 512))
		}
	})
}
