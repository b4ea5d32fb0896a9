package openai

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// FuzzChatCompletionRequestAppendJSON builds a request from fuzzed
// strings, raw members, numbers and a mask of which optional members are
// set, and holds AppendJSON to encoding/json: the same bytes, or both
// fail.
func FuzzChatCompletionRequestAppendJSON(f *testing.F) {
	f.Add("org/model", "hi", "ann", []byte(`{"type":"object"}`), []byte(`["END"]`), 0.25, int64(20), uint32(0xffffffff))
	f.Add("<&>", "\u2028\xff\"\\", "", []byte(" {\n \"a\" : \"<b>\" } "), []byte(`"auto"`), 1e-7, int64(-1), uint32(0x5555))
	f.Add("", "", "", []byte(`{"a":}`), []byte{}, 1e21, int64(1<<62), uint32(1<<3|1<<9))
	f.Add("m", "x", "y", []byte("\"\u2029\""), []byte(nil), math.Copysign(0, -1), int64(0), uint32(0))
	f.Fuzz(func(t *testing.T, model, text, name string, raw, raw2 []byte, num float64, n int64, mask uint32) {
		set := func(bit int) bool { return mask&(1<<bit) != 0 }
		r := ChatCompletionRequest{Model: model, Stream: set(0)}
		msg := Message{Role: &name, Content: String(text), Name: name, ToolCallID: text}
		if set(1) {
			msg.Content = jsontext.Value(raw)
		}
		if set(2) {
			msg.Role = nil
			msg.Reasoning = &text
			msg.ToolCalls = []ToolCall{{ID: name, Type: ToolTypeFunction, Function: FunctionCall{Name: name, Arguments: text}}, {}}
		}
		if set(3) {
			msg.FunctionCall = jsontext.Value(raw2)
		}
		if set(4) {
			r.Messages = []Message{msg, {Role: &text, Content: jsontext.Value(raw2)}}
		} else if set(5) {
			r.Messages = []Message{msg}
		}
		if set(6) {
			def := FunctionDefinition{Name: name, Description: text, Parameters: jsontext.Value(raw)}
			if set(7) {
				def.Strict = ptr(set(8))
			}
			r.Tools = []Tool{{Type: ToolTypeFunction, Function: def}, {Type: text}}
		}
		if set(9) {
			r.ToolChoice = jsontext.Value(raw2)
		}
		if set(10) {
			r.Temperature, r.TopP = &num, ptr(-num)
		}
		if set(11) {
			r.FrequencyPenalty, r.PresencePenalty = ptr(num*1e-300), ptr(num*1e300)
		}
		if set(12) {
			r.MaxTokens, r.Seed = &n, ptr(-n)
		}
		if set(13) {
			r.Stop = jsontext.Value(raw)
		}
		if set(14) {
			r.LogitBias = map[string]int64{name: n, text: -n, model: 0}
		}
		if set(15) {
			r.ResponseFormat = &ResponseFormat{Type: &name}
			if set(16) {
				r.ResponseFormat.JSONSchema = &JSONSchema{Name: &text, Description: name, Schema: jsontext.Value(raw)}
			}
		}
		if set(17) {
			r.ChatTemplateKwargs = jsontext.Value(raw2)
		}
		if set(18) {
			r.ReasoningEffort = &text
		}
		if set(19) {
			r.StreamOptions = &StreamOptions{IncludeUsage: set(20)}
		}
		if set(21) {
			r.MaxCompletionTokens, r.N, r.TopLogprobs = &n, ptr(n+1), ptr(n-1)
			r.User, r.ParallelToolCalls, r.Logprobs = &model, ptr(set(22)), ptr(set(23))
			r.Functions, r.FunctionCall = jsontext.Value(raw), jsontext.Value(raw2)
		}
		want, wantErr := json.Marshal(r)
		got, err := r.AppendJSON(nil)
		switch {
		case (err == nil) != (wantErr == nil):
			t.Fatalf("AppendJSON: %v (wrote %s); encoding/json: %v", err, got, wantErr)
		case err == nil && string(got) != string(want):
			t.Errorf("got  %s\nwant %s", got, want)
		}
	})
}
