package edge

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/openai"
)

// Bounds on a Responses request beyond those of chat.
const (
	maxMetadata         = 16
	maxMetadataKeyLen   = 64
	maxMetadataValueLen = 512
)

// itemReference is an input item naming an output item of a stored
// response by its id.
const itemReference = "item_reference"

// inputRoles are the roles of an input message.
var inputRoles = map[string]inferencev1.Role{
	openai.RoleSystem:    inferencev1.Role_ROLE_SYSTEM,
	openai.RoleDeveloper: inferencev1.Role_ROLE_DEVELOPER,
	openai.RoleUser:      inferencev1.Role_ROLE_USER,
	openai.RoleAssistant: inferencev1.Role_ROLE_ASSISTANT,
}

// responsesCall is a decoded Responses request, translated into the chat
// request the engines speak, plus what the response object echoes.
type responsesCall struct {
	// req is the chat request; its messages are set once the previous
	// response (if any) is loaded: instructions, history, input.
	req *inferencev1.ChatCompletionRequest
	// instructions is the system message made of instructions, or nil.
	instructions *inferencev1.Message
	input        []*inferencev1.Message
	stream       bool
	oneToolCall  bool
	store        bool
	previousID   string
	// echo is the response object's members that repeat the request.
	echo openai.Response
}

// messages sets the chat request's messages: the instructions (never
// carried over from a previous response, as OpenAI does), the previous
// response's conversation, then the input.
func (c *responsesCall) messages(history []*inferencev1.Message) {
	c.req.Messages = c.req.Messages[:0]
	if c.instructions != nil {
		c.req.Messages = append(c.req.Messages, c.instructions)
	}
	c.req.Messages = append(c.req.Messages, history...)
	c.req.Messages = append(c.req.Messages, c.input...)
}

// history is the conversation a stored response keeps: the messages
// without the instructions, then reply.
func (c *responsesCall) history(reply *inferencev1.Message) []*inferencev1.Message {
	h := c.req.GetMessages()
	if c.instructions != nil && len(h) > 0 {
		h = h[1:]
	}
	return append(slices.Clip(h), reply)
}

// itemResolver finds an output item of a stored response by its id, for
// an item_reference: nil when the tenant has no such item.
type itemResolver func(id string) *openai.ResponseInputItem

// decodeResponses parses and validates a Responses body; resolve finds
// the items it references.
func decodeResponses(body []byte, requestID string, resolve itemResolver) (*responsesCall, *apiError) {
	var in openai.ResponseRequest
	if err := decodeJSON(body, &in); err != nil {
		return nil, err
	}
	model, aerr := requireModel(in.Model)
	if aerr != nil {
		return nil, aerr
	}
	switch {
	case in.Background != nil && *in.Background:
		return nil, invalid("background", "background is not supported; send the request with stream, or wait for its reply")
	case !isNull(in.Conversation):
		return nil, invalid("conversation", "conversation is not supported; continue a conversation with previous_response_id")
	case in.Truncation != nil && *in.Truncation != openai.ResponseTruncationDisabled:
		return nil, invalid("truncation", "truncation %q is not supported; only disabled is", *in.Truncation)
	}
	out := &inferencev1.ChatCompletionRequest{RequestId: requestID, Model: model}
	call := &responsesCall{req: out, stream: in.Stream, store: in.Store == nil || *in.Store}
	if in.Instructions != nil && *in.Instructions != "" {
		call.instructions = &inferencev1.Message{Role: inferencev1.Role_ROLE_SYSTEM, Content: &inferencev1.Message_Text{Text: *in.Instructions}}
	}
	if err := decodeInput(in.Input, call, resolve); err != nil {
		return nil, err
	}
	if p := in.PreviousResponseID; p != nil {
		if *p == "" {
			return nil, invalid("previous_response_id", "previous_response_id must not be empty; leave it out to start a conversation")
		}
		call.previousID = *p
	}
	if t := in.Temperature; t != nil {
		if *t < 0 || *t > 2 {
			return nil, invalid("temperature", "temperature %v is out of range [0, 2]", *t)
		}
		out.Temperature = t
	}
	if p := in.TopP; p != nil {
		if *p < 0 || *p > 1 {
			return nil, invalid("top_p", "top_p %v is out of range [0, 1]", *p)
		}
		out.TopP = p
	}
	if n := in.MaxOutputTokens; n != nil {
		if *n < 1 {
			return nil, invalid("max_output_tokens", "max_output_tokens must be at least 1")
		}
		v := *n
		out.MaxTokens = &v
	}
	if err := decodeResponseTools(&in, out); err != nil {
		return nil, err
	}
	format, err := decodeTextFormat(&in, out)
	if err != nil {
		return nil, err
	}
	if r := in.Reasoning; r != nil && r.Effort != nil {
		if !slices.Contains(openai.ReasoningEfforts, *r.Effort) {
			return nil, invalid("reasoning.effort", "reasoning.effort %q is not one of %s", *r.Effort, strings.Join(openai.ReasoningEfforts, ", "))
		}
		out.ReasoningEffort = r.Effort
	}
	if err := checkMetadata(in.Metadata); err != nil {
		return nil, err
	}
	call.oneToolCall = in.ParallelToolCalls != nil && !*in.ParallelToolCalls

	e := &call.echo
	e.Model = model
	if call.instructions != nil {
		e.Instructions = in.Instructions
	}
	e.MaxOutputTokens = in.MaxOutputTokens
	e.ParallelToolCalls = !call.oneToolCall
	if call.previousID != "" {
		e.PreviousResponseID = &call.previousID
	}
	if in.Reasoning != nil {
		e.Reasoning.Effort = in.Reasoning.Effort
	}
	e.Store = call.store
	e.Temperature, e.TopP = 1, 1
	if out.Temperature != nil {
		e.Temperature = *out.Temperature
	}
	if out.TopP != nil {
		e.TopP = *out.TopP
	}
	e.Text.Format = format
	e.ToolChoice = openai.String(openai.ToolChoiceAuto)
	if !isNull(in.ToolChoice) {
		e.ToolChoice = in.ToolChoice
	}
	e.Tools = make([]openai.ResponseTool, 0, len(in.Tools))
	for _, t := range in.Tools {
		if isNull(t.Parameters) {
			t.Parameters = nil
		}
		e.Tools = append(e.Tools, t)
	}
	e.Truncation = openai.ResponseTruncationDisabled
	e.User = in.User
	e.Metadata = in.Metadata
	if e.Metadata == nil {
		e.Metadata = map[string]string{}
	}
	return call, nil
}

// decodeInput translates input, a string (one user message) or a list of
// items, into chat messages: a message is a message; a function_call is a
// tool call of an assistant message (consecutive calls, and calls after
// the assistant's text, make one message, as one turn of a model does); a
// function_call_output is a tool message; an item_reference is the item
// of a stored response it names (as the Vercel AI SDK sends the
// assistant's earlier output when store is on). Reasoning items are
// dropped: the engines take no reasoning back.
func decodeInput(raw jsontext.Value, call *responsesCall, resolve itemResolver) *apiError {
	switch firstByte(raw) {
	case 0, 'n':
		if isNull(raw) {
			return invalid("input", "input is required")
		}
	case '"':
		s, err := jsonString(raw)
		if err != nil {
			return invalid("input", "input: %v", err)
		}
		call.input = []*inferencev1.Message{{Role: inferencev1.Role_ROLE_USER, Content: &inferencev1.Message_Text{Text: s}}}
		return nil
	case '[':
		var items []openai.ResponseInputItem
		if err := decodeJSONAt(raw, &items, "input"); err != nil {
			return err
		}
		if len(items) == 0 || len(items) > maxMessages {
			return invalid("input", "input must hold 1 to %d items", maxMessages)
		}
		var last *inferencev1.Message // the assistant message calls join
		for i := range items {
			it := &items[i]
			if it.Type != nil && *it.Type == itemReference {
				at := fmt.Sprintf("input[%d].id", i)
				if it.ID == "" {
					return invalid(at, "%s is required", at)
				}
				if it = resolve(it.ID); it == nil {
					e := notFound("item %s does not exist (or is no longer stored)", items[i].ID)
					e.Param = at
					return e
				}
			}
			m, err := decodeInputItem(it, i, last)
			if err != nil {
				return err
			}
			switch m {
			case nil: // dropped
			case last: // a call joined the assistant's message
			default:
				call.input = append(call.input, m)
				last = nil
				if m.Role == inferencev1.Role_ROLE_ASSISTANT {
					last = m
				}
			}
		}
		if len(call.input) == 0 {
			return invalid("input", "input holds no message")
		}
		return nil
	}
	return invalid("input", "input must be a string or an array of items")
}

func decodeInputItem(it *openai.ResponseInputItem, i int, last *inferencev1.Message) (*inferencev1.Message, *apiError) {
	at := fmt.Sprintf("input[%d]", i)
	typ := openai.ItemMessage
	if it.Type != nil {
		typ = *it.Type
	}
	switch typ {
	case openai.ItemMessage:
		return decodeInputMessage(it, at)
	case openai.ItemFunctionCall:
		if it.CallID == "" {
			return nil, invalid(at+".call_id", "%s.call_id is required", at)
		}
		if !toolNameRe.MatchString(it.Name) {
			return nil, invalid(at+".name", "%s.name %q must be 1 to 64 letters, digits, _ or -", at, it.Name)
		}
		if it.Arguments == nil {
			return nil, invalid(at+".arguments", "%s.arguments is required", at)
		}
		tc := &inferencev1.ToolCall{Id: it.CallID, Name: it.Name, Arguments: *it.Arguments}
		if last != nil {
			last.ToolCalls = append(last.ToolCalls, tc)
			return last, nil
		}
		return &inferencev1.Message{Role: inferencev1.Role_ROLE_ASSISTANT, ToolCalls: []*inferencev1.ToolCall{tc}}, nil
	case openai.ItemFunctionCallOutput:
		if it.CallID == "" {
			return nil, invalid(at+".call_id", "%s.call_id is required", at)
		}
		text, err := inputText(it.Output, at+".output")
		if err != nil {
			return nil, err
		}
		return &inferencev1.Message{Role: inferencev1.Role_ROLE_TOOL, ToolCallId: it.CallID,
			Content: &inferencev1.Message_Text{Text: text}}, nil
	case "reasoning":
		return nil, nil
	}
	return nil, invalid(at+".type", "%s.type %q is not supported; input items are message, function_call and function_call_output", at, typ)
}

func decodeInputMessage(it *openai.ResponseInputItem, at string) (*inferencev1.Message, *apiError) {
	if it.Role == nil {
		return nil, invalid(at+".role", "%s.role is required", at)
	}
	role, ok := inputRoles[*it.Role]
	if !ok {
		return nil, invalid(at+".role", "%s.role %q is not one of system, developer, user, assistant", at, *it.Role)
	}
	m := &inferencev1.Message{Role: role}
	switch firstByte(it.Content) {
	case '"':
		s, err := jsonString(it.Content)
		if err != nil {
			return nil, invalid(at+".content", "%s.content: %v", at, err)
		}
		m.Content = &inferencev1.Message_Text{Text: s}
		return m, nil
	case '[':
		var parts []openai.ResponseInputPart
		if err := decodeJSONAt(it.Content, &parts, at+".content"); err != nil {
			return nil, err
		}
		if len(parts) == 0 {
			return nil, invalid(at+".content", "%s.content must not be an empty array", at)
		}
		cp := &inferencev1.ContentParts{}
		for j, p := range parts {
			pat := fmt.Sprintf("%s.content[%d]", at, j)
			if p.Type != openai.PartInputText && p.Type != openai.PartOutputText {
				return nil, invalid(pat+".type", "%s.type %q is not supported; only input_text and output_text parts are", pat, p.Type)
			}
			if p.Text == nil {
				return nil, invalid(pat+".text", "%s.text is required", pat)
			}
			cp.Parts = append(cp.Parts, &inferencev1.ContentPart{Text: *p.Text})
		}
		m.Content = &inferencev1.Message_Parts{Parts: cp}
		return m, nil
	}
	return nil, invalid(at+".content", "%s.content must be a string or an array of input_text parts", at)
}

// inputText is a function_call_output's output: a string, or input_text
// parts joined with "\n".
func inputText(raw jsontext.Value, at string) (string, *apiError) {
	switch firstByte(raw) {
	case '"':
		s, err := jsonString(raw)
		if err != nil {
			return "", invalid(at, "%s: %v", at, err)
		}
		return s, nil
	case '[':
		var parts []openai.ResponseInputPart
		if err := decodeJSONAt(raw, &parts, at); err != nil {
			return "", err
		}
		texts := make([]string, 0, len(parts))
		for j, p := range parts {
			if p.Type != openai.PartInputText || p.Text == nil {
				return "", invalid(fmt.Sprintf("%s[%d]", at, j), "%s[%d] must be an input_text part; no other is supported", at, j)
			}
			texts = append(texts, *p.Text)
		}
		return strings.Join(texts, "\n"), nil
	}
	return "", invalid(at, "%s is required: a string or an array of input_text parts", at)
}

// decodeResponseTools checks the function tools and tool_choice, as chat's
// (decodeTools) but in the Responses API's flat shapes.
func decodeResponseTools(in *openai.ResponseRequest, out *inferencev1.ChatCompletionRequest) *apiError {
	if len(in.Tools) > maxTools {
		return invalid("tools", "tools holds at most %d tools", maxTools)
	}
	seen := make(map[string]bool, len(in.Tools))
	for i, t := range in.Tools {
		at := fmt.Sprintf("tools[%d]", i)
		if t.Type != openai.ToolTypeFunction {
			return invalid(at+".type", "%s.type %q is not supported; only function tools are", at, t.Type)
		}
		if !toolNameRe.MatchString(t.Name) {
			return invalid(at+".name", "%s.name %q must be 1 to 64 letters, digits, _ or -", at, t.Name)
		}
		if seen[t.Name] {
			return invalid(at+".name", "tool %q is offered twice", t.Name)
		}
		seen[t.Name] = true
		tool := &inferencev1.Tool{Name: t.Name, Strict: t.Strict}
		if t.Description != nil {
			tool.Description = *t.Description
		}
		if !isNull(t.Parameters) {
			if firstByte(t.Parameters) != '{' {
				return invalid(at+".parameters", "%s.parameters must be a JSON Schema object", at)
			}
			if err := checkRawJSON(t.Parameters, at+".parameters"); err != nil {
				return err
			}
			tool.ParametersJson = string(t.Parameters)
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
		if mode == inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED && len(out.Tools) == 0 {
			return invalid("tool_choice", `tool_choice "required" needs at least one tool in tools`)
		}
		out.ToolChoice = &inferencev1.ToolChoice{Mode: mode}
		return nil
	case '{':
		var named openai.ResponseToolChoiceFunction
		if err := unmarshal(in.ToolChoice, &named); err != nil || named.Type != openai.ToolTypeFunction || named.Name == "" {
			return invalid("tool_choice", `tool_choice object must be {"type":"function","name":...}`)
		}
		if !seen[named.Name] {
			return invalid("tool_choice", "tool_choice names %q, which is not among the tools", named.Name)
		}
		out.ToolChoice = &inferencev1.ToolChoice{Mode: inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_FUNCTION, FunctionName: named.Name}
		return nil
	}
	return invalid("tool_choice", "tool_choice must be none, auto, required or a named function")
}

// decodeTextFormat checks text.format and passes it to the engine as
// chat's response_format; it returns the format as the response echoes it.
func decodeTextFormat(in *openai.ResponseRequest, out *inferencev1.ChatCompletionRequest) (jsontext.Value, *apiError) {
	textFormat := jsontext.Value(`{"type":"text"}`)
	if in.Text == nil || in.Text.Format == nil {
		return textFormat, nil
	}
	f := in.Text.Format
	if f.Type == nil {
		return nil, invalid("text.format.type", "text.format.type is required")
	}
	switch *f.Type {
	case openai.ResponseFormatText:
		out.ResponseFormat = &inferencev1.ResponseFormat{Type: inferencev1.ResponseFormatType_RESPONSE_FORMAT_TYPE_TEXT}
		return textFormat, nil
	case openai.ResponseFormatJSONObject:
		out.ResponseFormat = &inferencev1.ResponseFormat{Type: inferencev1.ResponseFormatType_RESPONSE_FORMAT_TYPE_JSON_OBJECT}
		return jsontext.Value(`{"type":"json_object"}`), nil
	case openai.ResponseFormatJSONSchema:
	default:
		return nil, invalid("text.format.type", "text.format.type %q is not one of text, json_object, json_schema", *f.Type)
	}
	if f.Name == nil {
		return nil, invalid("text.format.name", "text.format.name is required for type json_schema")
	}
	if !toolNameRe.MatchString(*f.Name) {
		return nil, invalid("text.format.name", "text.format.name %q must be 1 to 64 letters, digits, _ or -", *f.Name)
	}
	if isNull(f.Schema) || firstByte(f.Schema) != '{' {
		return nil, invalid("text.format.schema", "text.format.schema must be a JSON Schema object")
	}
	if err := checkRawJSON(f.Schema, "text.format.schema"); err != nil {
		return nil, err
	}
	out.ResponseFormat = &inferencev1.ResponseFormat{Type: inferencev1.ResponseFormatType_RESPONSE_FORMAT_TYPE_JSON_SCHEMA,
		JsonSchema: &inferencev1.JSONSchema{Name: *f.Name, Description: f.Description, Strict: f.Strict, SchemaJson: string(f.Schema)}}
	return jsontext.Value(mustMarshal(f)), nil
}

// checkMetadata holds metadata to OpenAI's bounds: 16 pairs, keys of 64
// characters, values of 512.
func checkMetadata(md map[string]string) *apiError {
	if len(md) > maxMetadata {
		return invalid("metadata", "metadata holds at most %d pairs", maxMetadata)
	}
	for _, k := range slices.Sorted(maps.Keys(md)) {
		if len([]rune(k)) > maxMetadataKeyLen {
			return invalid("metadata", "metadata key %q is longer than %d characters", k, maxMetadataKeyLen)
		}
		if len([]rune(md[k])) > maxMetadataValueLen {
			return invalid("metadata."+k, "metadata.%s is longer than %d characters", k, maxMetadataValueLen)
		}
	}
	return nil
}
