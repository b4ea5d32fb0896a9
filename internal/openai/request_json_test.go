package openai

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// rawValues are raw members as encoding/json rewrites them: spaces
// between tokens, HTML-unsafe characters and U+2028/2029 in strings,
// escapes that look like the end of a string, bytes that are not UTF-8
// (passed through), every kind of value.
var rawValues = []string{
	`"auto"`, `{"type":"function","function":{"name":"f"}}`, `["END","<stop>"]`,
	" {\n\t\"a\" : [ 1 , 2.5e-3 , true , false , null ] ,\r\n \"b\" : { } } ",
	`"<b>&amp;</b> \u003c"`, "\"line\u2028sep\u2029para\"", `"a \" <x> \\" `, `["\\", "&"]`,
	"\"bad \xff utf8\"", `-0.0e+00`, ` 7 `, `[]`, `{"":""}`, "\"\u2028\"",
}

// notJSON are raw members encoding/json refuses (and an empty one where
// omitempty does not leave it out: a message's content).
var notJSON = []string{"{", `{"a":}`, "nul", `"open`, "[1,]", "1 2", "\"tab\tin string\""}

// floats cover encoding/json's two formats and the edges between them.
var floats = []float64{0, math.Copysign(0, -1), 0.25, -1, 1e-6, 9.99e-7, 1e-7, 1.5e-10, 1e20, 1e21, 1.234e25,
	math.MaxFloat64, math.SmallestNonzeroFloat64, -math.MaxFloat64, 0.1, 1 / 3.0, 123456789.125}

// chatRequests cover every member AppendJSON writes: each omitempty
// member absent and present, nil and empty slices, null and present
// pointers, several messages, tools and tool calls, and strings with
// every escape.
func chatRequests() map[string]ChatCompletionRequest {
	call := func(id, name, args string) ToolCall {
		return ToolCall{ID: id, Type: ToolTypeFunction, Function: FunctionCall{Name: name, Arguments: args}}
	}
	cases := map[string]ChatCompletionRequest{
		"plain": {Model: "org/model", Messages: []Message{{Role: ptr(RoleUser), Content: String("hi")}},
			Stream: true, StreamOptions: &StreamOptions{IncludeUsage: true}},
		"every member": {
			Model: "m",
			Messages: []Message{
				{Role: ptr(RoleSystem), Content: String("be <terse> & exact")},
				{Role: ptr(RoleUser), Name: "ann", Content: jsontext.Value(`[{"type":"text","text":"what is"},{"type":"text","text":"the weather"}]`)},
				{Role: ptr(RoleAssistant), Reasoning: ptr("They want weather."),
					ToolCalls: []ToolCall{call("call_1", "get_weather", `{"city":"Oslo"}`), call("call_2", "f", "")}},
				{Role: ptr(RoleTool), ToolCallID: "call_1", Content: String("sunny")},
				{Role: ptr(RoleAssistant), FunctionCall: jsontext.Value(`{"name":"f","arguments":"{}"}`), Reasoning: ptr("")},
			},
			Tools: []Tool{
				{Type: ToolTypeFunction, Function: FunctionDefinition{Name: "get_weather", Description: "weather of a city",
					Parameters: jsontext.Value(`{"type":"object","properties":{"city":{"type":"string"}}}`), Strict: ptr(true)}},
				{Type: ToolTypeFunction, Function: FunctionDefinition{Name: "noop", Strict: ptr(false)}},
			},
			ToolChoice:         jsontext.Value(`{"type":"function","function":{"name":"get_weather"}}`),
			Temperature:        ptr(0.25),
			TopP:               ptr(0.9),
			MaxTokens:          ptr(int64(20)),
			Stop:               jsontext.Value(`["END","\u003cstop\u003e"]`),
			Seed:               ptr(int64(-7)),
			FrequencyPenalty:   ptr(0.5),
			PresencePenalty:    ptr(-1.0),
			LogitBias:          map[string]int64{"50256": -100, "7": 3, "100": 1, "<&>": 0},
			ResponseFormat:     &ResponseFormat{Type: ptr(ResponseFormatJSONSchema), JSONSchema: &JSONSchema{Name: ptr("reply"), Description: "a reply", Schema: jsontext.Value(`{"type":"object"}`), Strict: ptr(false)}},
			ChatTemplateKwargs: jsontext.Value(`{"enable_thinking":false}`),
			ReasoningEffort:    ptr("high"),
			Stream:             true,
			StreamOptions:      &StreamOptions{},

			MaxCompletionTokens: ptr(int64(0)),
			N:                   ptr(int64(1)),
			User:                ptr("u<1>"),
			ParallelToolCalls:   ptr(false),
			Logprobs:            ptr(true),
			TopLogprobs:         ptr(int64(3)),
			Functions:           jsontext.Value(`[{"name":"f"}]`),
			FunctionCall:        jsontext.Value(`"auto"`),
		},
		"whole reply": {Model: "m", Messages: []Message{{Role: ptr(RoleUser), Content: String("hi")}},
			Tools:      []Tool{{Type: ToolTypeFunction, Function: FunctionDefinition{Name: "f"}}},
			ToolChoice: String(ToolChoiceAuto), ResponseFormat: &ResponseFormat{Type: ptr(ResponseFormatJSONObject)}},
		"null pointers": {Messages: []Message{{}}, ResponseFormat: &ResponseFormat{JSONSchema: &JSONSchema{}}},
		"empty members": {Messages: []Message{{Role: ptr(""), Content: jsontext.Value("null"), ToolCalls: []ToolCall{}}},
			Tools: []Tool{}, ToolChoice: jsontext.Value{}, Stop: jsontext.Value{}, LogitBias: map[string]int64{},
			ChatTemplateKwargs: jsontext.Value{}, Functions: jsontext.Value{}, FunctionCall: jsontext.Value{}},
		"tool loop":    toolLoopRequest(),
		"no messages":  {Messages: []Message{}},
		"nil messages": {},
		"big logit bias": {Messages: []Message{}, LogitBias: func() map[string]int64 {
			m := make(map[string]int64)
			for i := range 40 {
				m[string(rune('a'+i%26))+string(rune('0'+i/26))] = int64(i - 20)
			}
			return m
		}()},
	}
	for i, s := range jsonStrings {
		cases["string "+string(rune('a'+i))] = ChatCompletionRequest{Model: s, ReasoningEffort: ptr(s), User: ptr(s),
			Messages: []Message{{Role: ptr(s), Content: String(s), Name: s, ToolCallID: s, Reasoning: ptr(s),
				ToolCalls: []ToolCall{call(s, s, s)}}},
			Tools:          []Tool{{Type: s, Function: FunctionDefinition{Name: s, Description: s}}},
			LogitBias:      map[string]int64{s: 1, s + "x": 2},
			ResponseFormat: &ResponseFormat{Type: ptr(s), JSONSchema: &JSONSchema{Name: ptr(s), Description: s}}}
	}
	for i, raw := range rawValues {
		v := jsontext.Value(raw)
		cases["raw "+string(rune('a'+i))] = ChatCompletionRequest{
			Messages:   []Message{{Content: v, FunctionCall: v}},
			Tools:      []Tool{{Function: FunctionDefinition{Parameters: v}}},
			ToolChoice: v, Stop: v, ChatTemplateKwargs: v, Functions: v, FunctionCall: v,
			ResponseFormat: &ResponseFormat{JSONSchema: &JSONSchema{Schema: v}}}
	}
	for i, f := range floats {
		cases["float "+string(rune('a'+i))] = ChatCompletionRequest{Temperature: ptr(f), TopP: ptr(-f),
			FrequencyPenalty: ptr(f * 0.3), PresencePenalty: ptr(f / 7)}
	}
	return cases
}

func TestChatCompletionRequestAppendJSONMatchesEncodingJSON(t *testing.T) {
	for name, r := range chatRequests() {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := r.AppendJSON([]byte("x"))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if string(got) != "x"+string(want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got[1:], want)
		}
	}
}

// Where encoding/json fails, AppendJSON fails: a raw member that is not
// JSON in any place, a number JSON cannot write.
func TestChatCompletionRequestAppendJSONFailsAsEncodingJSON(t *testing.T) {
	cases := map[string]ChatCompletionRequest{"empty content": {Messages: []Message{{Content: jsontext.Value{}}}}}
	for i, raw := range notJSON {
		v := jsontext.Value(raw)
		suffix := " " + string(rune('a'+i))
		cases["content"+suffix] = ChatCompletionRequest{Messages: []Message{{Content: v}}}
		cases["function_call of a message"+suffix] = ChatCompletionRequest{Messages: []Message{{FunctionCall: v}}}
		cases["parameters"+suffix] = ChatCompletionRequest{Tools: []Tool{{Function: FunctionDefinition{Parameters: v}}}}
		cases["schema"+suffix] = ChatCompletionRequest{ResponseFormat: &ResponseFormat{JSONSchema: &JSONSchema{Schema: v}}}
		cases["stop"+suffix] = ChatCompletionRequest{Stop: v}
		cases["function_call"+suffix] = ChatCompletionRequest{Messages: []Message{}, FunctionCall: v}
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		cases[fmt.Sprint("temperature ", f)] = ChatCompletionRequest{Temperature: ptr(f)}
		cases[fmt.Sprint("presence_penalty ", f)] = ChatCompletionRequest{PresencePenalty: ptr(f)}
	}
	for name, r := range cases {
		if _, err := json.Marshal(r); err == nil {
			t.Fatalf("%s: encoding/json accepts it", name)
		}
		if got, err := r.AppendJSON(nil); err == nil {
			t.Errorf("%s: AppendJSON wrote %s, want an error", name, got)
		}
	}
}

// toolLoopRequest is a turn of a tool loop: a long conversation with tool calls
// and results, and tools with schemas of some size.
func toolLoopRequest() ChatCompletionRequest {
	schema := jsontext.Value(`{"type":"object","properties":{` + strings.Repeat(`"field":{"type":"string","description":"a field of the thing, <not> optional"},`, 8) +
		`"last":{"type":"integer"}},"required":["last"]}`)
	text := strings.Repeat("Some prose of a conversation, with \"quotes\" and a line.\n", 8)
	r := ChatCompletionRequest{Model: "org/model", Messages: []Message{{Role: ptr(RoleSystem), Content: String(text)}},
		Temperature: ptr(0.2), MaxTokens: ptr(int64(1024)), Stream: true, StreamOptions: &StreamOptions{IncludeUsage: true}}
	for i := range 5 {
		r.Tools = append(r.Tools, Tool{Type: ToolTypeFunction, Function: FunctionDefinition{Name: "tool_" + strconv.Itoa(i), Description: "does a thing", Parameters: schema}})
		r.Messages = append(r.Messages,
			Message{Role: ptr(RoleUser), Content: String(text)},
			Message{Role: ptr(RoleAssistant), Content: jsontext.Value("null"), ToolCalls: []ToolCall{{ID: "call_" + strconv.Itoa(i), Type: ToolTypeFunction,
				Function: FunctionCall{Name: "tool_" + strconv.Itoa(i), Arguments: `{"last":1,"field":"value"}`}}}},
			Message{Role: ptr(RoleTool), ToolCallID: "call_" + strconv.Itoa(i), Content: String(text)})
	}
	r.ToolChoice = String(ToolChoiceAuto)
	return r
}

func BenchmarkChatCompletionRequestJSON(b *testing.B) {
	requests := chatRequests()
	for _, name := range []string{"plain", "every member", "tool loop"} {
		r := requests[name]
		b.Run(name+"/encoding-json", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = json.Marshal(r)
			}
		})
		b.Run(name+"/AppendJSON", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = r.AppendJSON(nil)
			}
		})
	}
}
