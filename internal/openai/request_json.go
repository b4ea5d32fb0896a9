package openai

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// AppendJSON appends r's JSON exactly as encoding/json's Marshal writes
// it, without reflection: the vLLM engine sends one per chat call, and
// encoding/json's walk of the struct was about 2 % of the gateway's CPU
// at 1,000 req/s. It fails where Marshal fails: a NaN or infinite
// number, a raw member that is not JSON. request_json_test.go holds the
// bytes equal to encoding/json's; change the struct and this together.
func (r *ChatCompletionRequest) AppendJSON(b []byte) ([]byte, error) {
	b, err := r.appendJSON(slices.Grow(b, r.sizeHint()))
	if err != nil {
		return b, fmt.Errorf("openai: encoding a chat completion request: %w", err)
	}
	return b, nil
}

func (r *ChatCompletionRequest) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"model":`...)
	b = AppendString(b, r.Model)
	b = append(b, `,"messages":`...)
	if r.Messages == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Messages {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = r.Messages[i].appendJSON(b); err != nil {
				return b, fmt.Errorf("messages[%d]: %w", i, err)
			}
		}
		b = append(b, ']')
	}
	if len(r.Tools) > 0 {
		b = append(b, `,"tools":[`...)
		for i := range r.Tools {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = r.Tools[i].appendJSON(b); err != nil {
				return b, fmt.Errorf("tools[%d]: %w", i, err)
			}
		}
		b = append(b, ']')
	}
	w := memberWriter{b: b}
	w.raw(`,"tool_choice":`, r.ToolChoice)
	w.float(`,"temperature":`, r.Temperature)
	w.float(`,"top_p":`, r.TopP)
	w.int(`,"max_tokens":`, r.MaxTokens)
	w.raw(`,"stop":`, r.Stop)
	w.int(`,"seed":`, r.Seed)
	w.float(`,"frequency_penalty":`, r.FrequencyPenalty)
	w.float(`,"presence_penalty":`, r.PresencePenalty)
	if len(r.LogitBias) > 0 {
		w.b = appendLogitBias(append(w.b, `,"logit_bias":`...), r.LogitBias)
	}
	if rf := r.ResponseFormat; rf != nil {
		w.b = append(w.b, `,"response_format":{"type":`...)
		w.b = appendStringOrNull(w.b, rf.Type)
		if js := rf.JSONSchema; js != nil {
			w.b = append(w.b, `,"json_schema":{"name":`...)
			w.b = appendStringOrNull(w.b, js.Name)
			if js.Description != "" {
				w.b = append(w.b, `,"description":`...)
				w.b = AppendString(w.b, js.Description)
			}
			w.raw(`,"schema":`, js.Schema)
			w.bool(`,"strict":`, js.Strict)
			w.b = append(w.b, '}')
		}
		w.b = append(w.b, '}')
	}
	w.raw(`,"chat_template_kwargs":`, r.ChatTemplateKwargs)
	w.string(`,"reasoning_effort":`, r.ReasoningEffort)
	w.b = append(w.b, `,"stream":`...)
	w.b = strconv.AppendBool(w.b, r.Stream)
	if r.StreamOptions != nil {
		w.b = append(w.b, `,"stream_options":{"include_usage":`...)
		w.b = strconv.AppendBool(w.b, r.StreamOptions.IncludeUsage)
		w.b = append(w.b, '}')
	}
	w.int(`,"max_completion_tokens":`, r.MaxCompletionTokens)
	w.int(`,"n":`, r.N)
	w.string(`,"user":`, r.User)
	w.bool(`,"parallel_tool_calls":`, r.ParallelToolCalls)
	w.bool(`,"logprobs":`, r.Logprobs)
	w.int(`,"top_logprobs":`, r.TopLogprobs)
	w.raw(`,"functions":`, r.Functions)
	w.raw(`,"function_call":`, r.FunctionCall)
	if w.err != nil {
		return w.b, w.err
	}
	return append(w.b, '}'), nil
}

func (m *Message) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"role":`...)
	b = appendStringOrNull(b, m.Role)
	b = append(b, `,"content":`...)
	b, err := appendRaw(b, m.Content)
	if err != nil {
		return b, fmt.Errorf("content: %w", err)
	}
	if m.Name != "" {
		b = append(b, `,"name":`...)
		b = AppendString(b, m.Name)
	}
	if m.ToolCallID != "" {
		b = append(b, `,"tool_call_id":`...)
		b = AppendString(b, m.ToolCallID)
	}
	if len(m.ToolCalls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i := range m.ToolCalls {
			if i > 0 {
				b = append(b, ',')
			}
			b = m.ToolCalls[i].appendJSON(b)
		}
		b = append(b, ']')
	}
	w := memberWriter{b: b}
	w.string(`,"reasoning":`, m.Reasoning)
	w.raw(`,"function_call":`, m.FunctionCall)
	if w.err != nil {
		return w.b, w.err
	}
	return append(w.b, '}'), nil
}

func (tc *ToolCall) appendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = AppendString(b, tc.ID)
	b = append(b, `,"type":`...)
	b = AppendString(b, tc.Type)
	b = append(b, `,"function":{"name":`...)
	b = AppendString(b, tc.Function.Name)
	b = append(b, `,"arguments":`...)
	b = AppendString(b, tc.Function.Arguments)
	return append(b, "}}"...)
}

func (t *Tool) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"type":`...)
	b = AppendString(b, t.Type)
	b = append(b, `,"function":{"name":`...)
	b = AppendString(b, t.Function.Name)
	if t.Function.Description != "" {
		b = append(b, `,"description":`...)
		b = AppendString(b, t.Function.Description)
	}
	w := memberWriter{b: b}
	w.raw(`,"parameters":`, t.Function.Parameters)
	w.bool(`,"strict":`, t.Function.Strict)
	if w.err != nil {
		return w.b, w.err
	}
	return append(w.b, "}}"...), nil
}

// memberWriter appends the members that omitempty leaves out when nil or
// empty, keeping the first error, so that a run of them reads as the
// struct's list of members.
type memberWriter struct {
	b   []byte
	err error
}

func (w *memberWriter) raw(name string, v jsontext.Value) {
	if len(v) == 0 || w.err != nil {
		return
	}
	w.b = append(w.b, name...)
	if w.b, w.err = appendRaw(w.b, v); w.err != nil {
		w.err = fmt.Errorf("%s: %w", name[2:len(name)-2], w.err)
	}
}

func (w *memberWriter) float(name string, f *float64) {
	if f == nil || w.err != nil {
		return
	}
	w.b = append(w.b, name...)
	if w.b, w.err = appendFloat(w.b, *f); w.err != nil {
		w.err = fmt.Errorf("%s: %w", name[2:len(name)-2], w.err)
	}
}

func (w *memberWriter) int(name string, n *int64) {
	if n != nil {
		w.b = strconv.AppendInt(append(w.b, name...), *n, 10)
	}
}

func (w *memberWriter) bool(name string, v *bool) {
	if v != nil {
		w.b = strconv.AppendBool(append(w.b, name...), *v)
	}
}

func (w *memberWriter) string(name string, s *string) {
	if s != nil {
		w.b = AppendString(append(w.b, name...), *s)
	}
}

// appendLogitBias writes the map in its keys' order, as encoding/json
// does.
func appendLogitBias(b []byte, m map[string]int64) []byte {
	var buf [16]string
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i == 0 {
			b = append(b, '{')
		} else {
			b = append(b, ',')
		}
		b = AppendString(b, k)
		b = append(b, ':')
		b = strconv.AppendInt(b, m[k], 10)
	}
	return append(b, '}')
}

// sizeHint is about the length of r's JSON, so that AppendJSON allocates
// its buffer once: the strings and raw members, which are most of it, and
// a bound on the names and punctuation around them. Escapes can make it
// short; then append grows the buffer.
func (r *ChatCompletionRequest) sizeHint() int {
	n := 96 + len(r.Model) + len(r.ToolChoice) + len(r.Stop) + len(r.ChatTemplateKwargs) +
		len(r.Functions) + len(r.FunctionCall) + 32*len(r.LogitBias)
	for _, p := range [...]bool{r.Temperature != nil, r.TopP != nil, r.MaxTokens != nil, r.Seed != nil,
		r.FrequencyPenalty != nil, r.PresencePenalty != nil, r.ReasoningEffort != nil, r.StreamOptions != nil,
		r.MaxCompletionTokens != nil, r.N != nil, r.User != nil, r.ParallelToolCalls != nil,
		r.Logprobs != nil, r.TopLogprobs != nil} {
		if p {
			n += 40
		}
	}
	for i := range r.Messages {
		m := &r.Messages[i]
		n += 48 + len(m.Content) + len(m.Name) + len(m.ToolCallID) + len(m.FunctionCall)
		if m.Reasoning != nil {
			n += 16 + len(*m.Reasoning)
		}
		for j := range m.ToolCalls {
			tc := &m.ToolCalls[j]
			n += 64 + len(tc.ID) + len(tc.Function.Name) + len(tc.Function.Arguments)
		}
	}
	for i := range r.Tools {
		f := &r.Tools[i].Function
		n += 96 + len(f.Name) + len(f.Description) + len(f.Parameters)
	}
	if rf := r.ResponseFormat; rf != nil {
		n += 48
		if js := rf.JSONSchema; js != nil {
			n += 64 + len(js.Description) + len(js.Schema)
		}
	}
	return n
}
