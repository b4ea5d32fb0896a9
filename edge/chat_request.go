package edge

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/openai"
)

// Bounds on a chat request, beyond which it is refused with 400.
const (
	maxMessages = 4096
	maxTools    = 128
	maxStops    = 4
	// maxLogitBias is OpenAI's bound on logit_bias's tokens.
	maxLogitBias = 300
	// maxTextBytes bounds a message's content (a string, or each text
	// part) and its reasoning, in bytes of UTF-8: the inference API's
	// bound (proto/tollgate/inference/v1), checked here so that the
	// refusal names the field as the client sent it.
	maxTextBytes = 4 << 20
	// maxParts bounds a message's text parts, maxToolCalls its tool
	// calls, maxNameLen its name and tool_call_id: the inference API's
	// bounds too.
	maxParts     = 1024
	maxToolCalls = 128
	maxNameLen   = 256
)

// tooLong is the refusal of a text field over maxTextBytes.
func tooLong(param string, n int) *apiError {
	return invalid(param, "%s is %d bytes; at most %d bytes (4 MiB) are accepted", param, n, maxTextBytes)
}

var roles = map[string]inferencev1.Role{
	openai.RoleSystem:    inferencev1.Role_ROLE_SYSTEM,
	openai.RoleDeveloper: inferencev1.Role_ROLE_DEVELOPER,
	openai.RoleUser:      inferencev1.Role_ROLE_USER,
	openai.RoleAssistant: inferencev1.Role_ROLE_ASSISTANT,
	openai.RoleTool:      inferencev1.Role_ROLE_TOOL,
}

// chatCall is a decoded chat request: the internal request plus what only
// the edge needs.
type chatCall struct {
	req          *inferencev1.ChatCompletionRequest
	stream       bool
	includeUsage bool
	// oneToolCall: parallel_tool_calls false, so at most one tool call
	// reaches the client.
	oneToolCall bool
}

// decodeChat parses and validates a chat completion body.
func decodeChat(body []byte, requestID string) (*chatCall, *apiError) {
	var in openai.ChatCompletionRequest
	if err := decodeJSON(body, &in); err != nil {
		return nil, err
	}
	model, aerr := requireModel(in.Model)
	if aerr != nil {
		return nil, aerr
	}
	// Before the messages, whose turns of the same era would be refused
	// on their own with a narrower hint.
	if !isNull(in.Functions) {
		return nil, invalid("functions", "functions is not supported (OpenAI deprecated it): offer each function in tools, "+
			`as {"type":"function","function":{"name":...,"parameters":...}}`)
	}
	if !isNull(in.FunctionCall) {
		return nil, invalid("function_call", "function_call is not supported (OpenAI deprecated it): use tool_choice, "+
			`"none", "auto", "required" or {"type":"function","function":{"name":...}}`)
	}
	if in.Messages == nil {
		return nil, invalid("messages", "messages is required")
	}
	if len(in.Messages) == 0 || len(in.Messages) > maxMessages {
		return nil, invalid("messages", "messages must hold 1 to %d messages", maxMessages)
	}
	out := &inferencev1.ChatCompletionRequest{RequestId: requestID, Model: model}
	for i := range in.Messages {
		m, err := decodeMessage(&in.Messages[i], i)
		if err != nil {
			return nil, err
		}
		out.Messages = append(out.Messages, m)
	}
	if err := decodeSampling(&in, out); err != nil {
		return nil, err
	}
	if err := decodeTools(&in, out); err != nil {
		return nil, err
	}
	if err := decodePenalties(&in, out); err != nil {
		return nil, err
	}
	if err := decodeResponseFormat(&in, out); err != nil {
		return nil, err
	}
	if err := decodeTemplateKwargs(&in, out); err != nil {
		return nil, err
	}
	if err := decodeReasoningEffort(&in, out); err != nil {
		return nil, err
	}
	if in.ParallelToolCalls != nil && len(out.Tools) == 0 {
		// As OpenAI refuses it: without tools it says nothing.
		return nil, invalid("parallel_tool_calls", "parallel_tool_calls is only allowed when tools are specified")
	}
	call := &chatCall{req: out, stream: in.Stream,
		oneToolCall: in.ParallelToolCalls != nil && !*in.ParallelToolCalls}
	out.WholeReply = !call.stream
	if in.StreamOptions != nil {
		if !call.stream {
			return nil, invalid("stream_options", "stream_options is only allowed when stream is true")
		}
		call.includeUsage = in.StreamOptions.IncludeUsage
	}
	return call, nil
}

func decodeMessage(m *openai.Message, i int) (*inferencev1.Message, *apiError) {
	at := "messages[" + strconv.Itoa(i) + "]"
	if m.Role == nil {
		return nil, invalid(at+".role", "%s.role is required", at)
	}
	role, ok := roles[*m.Role]
	if !ok {
		return nil, invalid(at+".role", "%s.role %q is not one of system, developer, user, assistant, tool", at, *m.Role)
	}
	out := &inferencev1.Message{Role: role, Name: m.Name, ToolCallId: m.ToolCallID}
	switch firstByte(m.Content) {
	case 0, 'n':
		if !isNull(m.Content) {
			return nil, invalid(at+".content", "%s.content must be a string, an array of text parts or null", at)
		}
		if role != inferencev1.Role_ROLE_ASSISTANT {
			return nil, invalid(at+".content", "%s.content is required for role %s", at, *m.Role)
		}
	case '"':
		s, err := jsonString(m.Content)
		if err != nil {
			return nil, invalid(at+".content", "%s.content: %v", at, err)
		}
		if len(s) > maxTextBytes {
			return nil, tooLong(at+".content", len(s))
		}
		out.Content = &inferencev1.Message_Text{Text: s}
	case '[':
		var parts []openai.ContentPart
		if err := decodeJSONAt(m.Content, &parts, at+".content"); err != nil {
			return nil, err
		}
		if len(parts) == 0 {
			return nil, invalid(at+".content", "%s.content must not be an empty array", at)
		}
		if len(parts) > maxParts {
			return nil, invalid(at+".content", "%s.content holds at most %d parts", at, maxParts)
		}
		cp := &inferencev1.ContentParts{}
		for j, p := range parts {
			if p.Type != openai.ContentPartText {
				return nil, invalid(fmt.Sprintf("%s.content[%d].type", at, j), "%s.content[%d].type %q is not supported; only text parts are", at, j, p.Type)
			}
			if p.Text == nil {
				return nil, invalid(fmt.Sprintf("%s.content[%d].text", at, j), "%s.content[%d].text is required", at, j)
			}
			if len(*p.Text) > maxTextBytes {
				return nil, tooLong(fmt.Sprintf("%s.content[%d].text", at, j), len(*p.Text))
			}
			cp.Parts = append(cp.Parts, &inferencev1.ContentPart{Text: *p.Text})
		}
		out.Content = &inferencev1.Message_Parts{Parts: cp}
	default:
		return nil, invalid(at+".content", "%s.content must be a string, an array of text parts or null", at)
	}
	if !isNull(m.FunctionCall) {
		return nil, invalid(at+".function_call", "%s.function_call is not supported (OpenAI deprecated it): send the call in tool_calls, "+
			`with its id, and its result as a message of role tool with that tool_call_id`, at)
	}
	if utf8.RuneCountInString(m.Name) > maxNameLen {
		return nil, invalid(at+".name", "%s.name is longer than %d characters", at, maxNameLen)
	}
	if utf8.RuneCountInString(m.ToolCallID) > maxNameLen {
		return nil, invalid(at+".tool_call_id", "%s.tool_call_id is longer than %d characters", at, maxNameLen)
	}
	if len(m.ToolCalls) > maxToolCalls {
		return nil, invalid(at+".tool_calls", "%s.tool_calls holds at most %d calls", at, maxToolCalls)
	}
	if role == inferencev1.Role_ROLE_TOOL && m.ToolCallID == "" {
		return nil, invalid(at+".tool_call_id", "%s.tool_call_id is required for role tool", at)
	}
	for j, tc := range m.ToolCalls {
		if role != inferencev1.Role_ROLE_ASSISTANT {
			return nil, invalid(at+".tool_calls", "%s.tool_calls is only allowed for role assistant", at)
		}
		if tc.ID == "" {
			return nil, invalid(fmt.Sprintf("%s.tool_calls[%d].id", at, j), "%s.tool_calls[%d].id is required", at, j)
		}
		if tc.Function.Name == "" {
			return nil, invalid(fmt.Sprintf("%s.tool_calls[%d].function.name", at, j), "%s.tool_calls[%d].function.name is required", at, j)
		}
		out.ToolCalls = append(out.ToolCalls, &inferencev1.ToolCall{Id: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	if m.Reasoning != nil && *m.Reasoning != "" {
		if role != inferencev1.Role_ROLE_ASSISTANT {
			return nil, invalid(at+".reasoning", "%s.reasoning is only allowed for role assistant", at)
		}
		if len(*m.Reasoning) > maxTextBytes {
			return nil, tooLong(at+".reasoning", len(*m.Reasoning))
		}
		out.Reasoning = *m.Reasoning
	}
	return out, nil
}

func decodeSampling(in *openai.ChatCompletionRequest, out *inferencev1.ChatCompletionRequest) *apiError {
	if t := in.Temperature; t != nil {
		if *t < 0 || *t > 2 {
			return invalid("temperature", "temperature %v is out of range [0, 2]", *t)
		}
		out.Temperature = t
	}
	if p := in.TopP; p != nil {
		if *p < 0 || *p > 1 {
			return invalid("top_p", "top_p %v is out of range [0, 1]", *p)
		}
		out.TopP = p
	}
	if n := in.N; n != nil && *n != 1 {
		return invalid("n", "n must be 1; Tollgate returns one choice per request")
	}
	if in.Logprobs != nil && *in.Logprobs {
		return invalid("logprobs", "logprobs is not supported; Tollgate returns no log probabilities (send false, or leave it out)")
	}
	if in.TopLogprobs != nil {
		return invalid("top_logprobs", "top_logprobs is not supported; Tollgate returns no log probabilities")
	}
	for _, f := range []struct {
		name string
		v    *int64
	}{{"max_tokens", in.MaxTokens}, {"max_completion_tokens", in.MaxCompletionTokens}} {
		if f.v == nil {
			continue
		}
		if *f.v < 1 {
			return invalid(f.name, "%s must be at least 1", f.name)
		}
		if out.MaxTokens == nil || *f.v < out.GetMaxTokens() {
			v := *f.v
			out.MaxTokens = &v
		}
	}
	out.Seed = in.Seed
	return decodeStop(in.Stop, out)
}

// decodeStop passes stop on as a list of sequences: a string, or an array
// of at most maxStops strings (null or [] is none). Each sequence must be
// a non-empty string: a null in the array would decode as "" (the empty
// string a model server refuses, or one that would stop a reply at once),
// so both are refused rather than passed on or dropped.
func decodeStop(raw jsontext.Value, out *inferencev1.ChatCompletionRequest) *apiError {
	const wrong = "stop must be a string or an array of strings"
	switch firstByte(raw) {
	case 0, 'n':
		if !isNull(raw) {
			return invalid("stop", wrong)
		}
		return nil
	case '"':
		var s string
		_ = unmarshal(raw, &s)
		if s == "" {
			return invalid("stop", "stop must not be an empty string; leave it out for none")
		}
		out.Stop = []string{s}
		return nil
	case '[':
	default:
		return invalid("stop", wrong)
	}
	var stops []*string
	if err := unmarshal(raw, &stops); err != nil {
		return invalid("stop", wrong)
	}
	if len(stops) > maxStops {
		return invalid("stop", "stop holds at most %d sequences", maxStops)
	}
	for i, s := range stops {
		switch {
		case s == nil:
			return invalid("stop", "stop[%d] is null; each stop sequence must be a non-empty string", i)
		case *s == "":
			return invalid("stop", "stop[%d] is an empty string; each stop sequence must be a non-empty string", i)
		}
		out.Stop = append(out.Stop, *s)
	}
	return nil
}

// decodePenalties checks the penalties and logit_bias as OpenAI does (a
// penalty in [-2, 2]; a bias in [-100, 100] for a token id, at most
// maxLogitBias of them) and passes them to the engine. Their JSON types
// were checked by decodeJSON.
func decodePenalties(in *openai.ChatCompletionRequest, out *inferencev1.ChatCompletionRequest) *apiError {
	for _, f := range []struct {
		name string
		v    *float64
		out  **float64
	}{{"frequency_penalty", in.FrequencyPenalty, &out.FrequencyPenalty}, {"presence_penalty", in.PresencePenalty, &out.PresencePenalty}} {
		if f.v != nil && (*f.v < -2 || *f.v > 2) {
			return invalid(f.name, "%s %v is out of range [-2, 2]", f.name, *f.v)
		}
		*f.out = f.v
	}
	if len(in.LogitBias) == 0 {
		return nil
	}
	if len(in.LogitBias) > maxLogitBias {
		return invalid("logit_bias", "logit_bias holds at most %d tokens", maxLogitBias)
	}
	// The first offending token in key order, so the answer does not
	// depend on map iteration.
	toks := slices.Sorted(maps.Keys(in.LogitBias))
	out.LogitBias = make(map[int64]int32, len(toks))
	for _, tok := range toks {
		param := "logit_bias." + tok
		id, err := strconv.ParseInt(tok, 10, 64)
		if err != nil || id < 0 || strconv.FormatInt(id, 10) != tok {
			return invalid(param, "logit_bias keys must be token ids (integers from 0 written in decimal), not %q", tok)
		}
		bias := in.LogitBias[tok]
		if bias < -100 || bias > 100 {
			return invalid(param, "%s %d is out of range [-100, 100]", param, bias)
		}
		out.LogitBias[id] = int32(bias)
	}
	return nil
}

// decodeResponseFormat checks response_format as OpenAI does and passes
// it to the engine, which enforces it or refuses the request.
func decodeResponseFormat(in *openai.ChatCompletionRequest, out *inferencev1.ChatCompletionRequest) *apiError {
	rf := in.ResponseFormat
	if rf == nil {
		return nil
	}
	if rf.Type == nil {
		return invalid("response_format.type", "response_format.type is required")
	}
	switch *rf.Type {
	case openai.ResponseFormatText:
		out.ResponseFormat = &inferencev1.ResponseFormat{Type: inferencev1.ResponseFormatType_RESPONSE_FORMAT_TYPE_TEXT}
		return nil
	case openai.ResponseFormatJSONObject:
		out.ResponseFormat = &inferencev1.ResponseFormat{Type: inferencev1.ResponseFormatType_RESPONSE_FORMAT_TYPE_JSON_OBJECT}
		return nil
	case openai.ResponseFormatJSONSchema:
	default:
		return invalid("response_format.type", "response_format.type %q is not one of text, json_object, json_schema", *rf.Type)
	}
	js := rf.JSONSchema
	if js == nil {
		return invalid("response_format.json_schema", "response_format.json_schema is required for type json_schema")
	}
	if js.Name == nil {
		return invalid("response_format.json_schema.name", "response_format.json_schema.name is required")
	}
	if !toolNameRe.MatchString(*js.Name) {
		return invalid("response_format.json_schema.name", "response_format.json_schema.name %q must be 1 to 64 letters, digits, _ or -", *js.Name)
	}
	schema := &inferencev1.JSONSchema{Name: *js.Name, Description: js.Description, Strict: js.Strict}
	if !isNull(js.Schema) {
		if firstByte(js.Schema) != '{' {
			return invalid("response_format.json_schema.schema", "response_format.json_schema.schema must be a JSON Schema object")
		}
		if err := checkRawJSON(js.Schema, "response_format.json_schema.schema"); err != nil {
			return err
		}
		schema.SchemaJson = string(js.Schema)
	}
	out.ResponseFormat = &inferencev1.ResponseFormat{Type: inferencev1.ResponseFormatType_RESPONSE_FORMAT_TYPE_JSON_SCHEMA, JsonSchema: schema}
	return nil
}

func decodeTools(in *openai.ChatCompletionRequest, out *inferencev1.ChatCompletionRequest) *apiError {
	if len(in.Tools) > maxTools {
		return invalid("tools", "tools holds at most %d tools", maxTools)
	}
	seen := make(map[string]bool, len(in.Tools))
	for i, t := range in.Tools {
		at := fmt.Sprintf("tools[%d]", i)
		if t.Type != openai.ToolTypeFunction {
			return invalid(at+".type", "%s.type must be function", at)
		}
		if !toolNameRe.MatchString(t.Function.Name) {
			return invalid(at+".function.name", "%s.function.name %q must be 1 to 64 letters, digits, _ or -", at, t.Function.Name)
		}
		if seen[t.Function.Name] {
			return invalid(at+".function.name", "tool %q is offered twice", t.Function.Name)
		}
		seen[t.Function.Name] = true
		tool := &inferencev1.Tool{Name: t.Function.Name, Description: t.Function.Description, Strict: t.Function.Strict}
		if !isNull(t.Function.Parameters) {
			if firstByte(t.Function.Parameters) != '{' {
				return invalid(at+".function.parameters", "%s.function.parameters must be a JSON Schema object", at)
			}
			if err := checkRawJSON(t.Function.Parameters, at+".function.parameters"); err != nil {
				return err
			}
			tool.ParametersJson = string(t.Function.Parameters)
		}
		out.Tools = append(out.Tools, tool)
	}
	switch firstByte(in.ToolChoice) {
	case 0, 'n':
		if isNull(in.ToolChoice) {
			return nil
		}
	case '"':
		var s string
		_ = unmarshal(in.ToolChoice, &s)
		mode, ok := map[string]inferencev1.ToolChoiceMode{
			openai.ToolChoiceNone:     inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_NONE,
			openai.ToolChoiceAuto:     inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_AUTO,
			openai.ToolChoiceRequired: inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED,
		}[s]
		if !ok {
			return invalid("tool_choice", "tool_choice %q is not one of none, auto, required", s)
		}
		// Malformed like a named tool that is not offered, so refused
		// the same way, before the policy sees it.
		if mode == inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED && len(out.Tools) == 0 {
			return invalid("tool_choice", `tool_choice "required" needs at least one tool in tools`)
		}
		out.ToolChoice = &inferencev1.ToolChoice{Mode: mode}
		return nil
	case '{':
		var named openai.NamedToolChoice
		if err := unmarshal(in.ToolChoice, &named); err != nil || named.Type != openai.ToolTypeFunction || named.Function.Name == "" {
			return invalid("tool_choice", `tool_choice object must be {"type":"function","function":{"name":...}}`)
		}
		if !seen[named.Function.Name] {
			return invalid("tool_choice", "tool_choice names %q, which is not among the tools", named.Function.Name)
		}
		out.ToolChoice = &inferencev1.ToolChoice{Mode: inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_FUNCTION, FunctionName: named.Function.Name}
		return nil
	}
	return invalid("tool_choice", "tool_choice must be none, auto, required or a named function")
}

// templateKwargs are the chat_template_kwargs a client may set, each a
// boolean: the switches reasoning models' templates read (Qwen3's
// enable_thinking, DeepSeek's and Kimi's thinking). Others are refused:
// vLLM lets the client's kwargs override the template's own arguments, so
// "tools", "documents" or "chat_template" would put tools or a whole
// template before the model past the key's tool scopes and the policy.
var templateKwargs = []string{"enable_thinking", "thinking"}

// decodeTemplateKwargs passes chat_template_kwargs on: an object of the
// allowed switches (null or {} is none), re-encoded in key order.
func decodeTemplateKwargs(in *openai.ChatCompletionRequest, out *inferencev1.ChatCompletionRequest) *apiError {
	switch firstByte(in.ChatTemplateKwargs) {
	case 0:
		return nil
	case 'n':
		if isNull(in.ChatTemplateKwargs) {
			return nil
		}
	case '{':
		var kw map[string]jsontext.Value
		if err := decodeJSONAt(in.ChatTemplateKwargs, &kw, "chat_template_kwargs"); err != nil {
			return err
		}
		b := []byte{'{'}
		for _, k := range slices.Sorted(maps.Keys(kw)) {
			param := "chat_template_kwargs." + k
			if !slices.Contains(templateKwargs, k) {
				return invalid(param, "%s is not allowed; chat_template_kwargs may set only %s", param, strings.Join(templateKwargs, ", "))
			}
			v := kw[k]
			if v.Kind() != 't' && v.Kind() != 'f' {
				return invalid(param, "%s must be a boolean", param)
			}
			if len(b) > 1 {
				b = append(b, ',')
			}
			b = strconv.AppendQuote(b, k)
			b = append(b, ':')
			b = strconv.AppendBool(b, v.Kind() == 't')
		}
		if len(b) > 1 { // {} is none
			out.ChatTemplateKwargsJson = string(append(b, '}'))
		}
		return nil
	}
	return invalid("chat_template_kwargs", "chat_template_kwargs must be an object")
}

// decodeReasoningEffort passes reasoning_effort on: one of
// openai.ReasoningEfforts, or null for none. Its JSON type was checked by
// decodeJSON. Not every model knows every value; OpenAI refuses the ones a
// model does not, but the gateway cannot tell, and passes them on.
func decodeReasoningEffort(in *openai.ChatCompletionRequest, out *inferencev1.ChatCompletionRequest) *apiError {
	e := in.ReasoningEffort
	if e == nil {
		return nil
	}
	if !slices.Contains(openai.ReasoningEfforts, *e) {
		return invalid("reasoning_effort", "reasoning_effort %q is not one of %s", *e, strings.Join(openai.ReasoningEfforts, ", "))
	}
	out.ReasoningEffort = e
	return nil
}

// checkRawJSON refuses a JSON value passed on as raw text (a schema, tool
// parameters) that is not valid UTF-8: the decoder lets such bytes through
// in raw values, and the inference contract's strings must be UTF-8.
func checkRawJSON(v jsontext.Value, param string) *apiError {
	if !utf8.Valid(v) {
		return invalid(param, "%s is not valid UTF-8", param)
	}
	return nil
}
