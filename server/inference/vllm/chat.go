package vllm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/openai"
)

// ChatCompletion implements inference.Engine. The server's completion is
// streamed, with usage, unless the caller takes the reply whole
// (req.whole_reply: a non-streamed HTTP reply): the server is then asked
// for a whole reply, one JSON body, instead of a chunk per token, which the
// engine would decode and relay one by one only to have them put together
// again. Either way the usage is what settles the key's tokens.
func (e *Engine) ChatCompletion(ctx context.Context, req *inferencev1.ChatCompletionRequest, send func(*inferencev1.ChatCompletionResponse) error) error {
	model, err := e.upstreamModel(req.GetModel(), inferencev1.ModelKind_MODEL_KIND_CHAT)
	if err != nil {
		return err
	}
	body := openai.ChatCompletionRequest{
		Model:              model,
		Messages:           messages(req.GetMessages()),
		Tools:              tools(req.GetTools()),
		ToolChoice:         toolChoice(req.GetToolChoice(), len(req.GetTools())),
		Temperature:        req.Temperature,
		TopP:               req.TopP,
		MaxTokens:          req.MaxTokens,
		Stop:               stop(req.GetStop()),
		Seed:               req.Seed,
		FrequencyPenalty:   req.FrequencyPenalty,
		PresencePenalty:    req.PresencePenalty,
		LogitBias:          logitBias(req.GetLogitBias()),
		ResponseFormat:     format(req.GetResponseFormat()),
		ChatTemplateKwargs: rawJSON(req.GetChatTemplateKwargsJson()),
		ReasoningEffort:    req.ReasoningEffort,
		Stream:             !req.GetWholeReply(),
	}
	if body.Stream {
		body.StreamOptions = withUsage
	}
	// Written by hand, not by encoding/json's reflection: the same bytes
	// (internal/openai's tests hold them equal), at a fraction of the CPU.
	b, err := body.AppendJSON(nil)
	if err != nil {
		err = encodeError(err)
		e.cfg.Metrics.observe(e.cfg.Namespace, "chat", err)
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the server's generation when the caller stops early
	resp, err := e.post(ctx, "chat", e.chatURL, b, req.GetModel(), req.GetRequestId())
	if err != nil {
		e.cfg.Metrics.observe(e.cfg.Namespace, "chat", err)
		return err
	}
	defer resp.Body.Close()
	callerStopped := false
	sendCounted := func(ev *inferencev1.ChatCompletionResponse) error {
		err := send(ev)
		callerStopped = err != nil
		return err
	}
	if body.Stream {
		err = relay(resp.Body, sendCounted)
	} else {
		err = relayWhole(resp, sendCounted)
	}
	if ctxErr := ctx.Err(); ctxErr != nil && err != nil {
		err = ctxErr
	}
	if callerStopped {
		e.cfg.Metrics.observe(e.cfg.Namespace, "chat", context.Canceled)
	} else {
		e.cfg.Metrics.observe(e.cfg.Namespace, "chat", err)
	}
	return err
}

// relay turns the server's SSE stream into the engine's events: a content
// or tool-call event per chunk that carries any, then, at data: [DONE],
// one event with the finish reason and usage. A stream that ends without
// them, or with vLLM's error event, fails.
func relay(body io.Reader, send func(*inferencev1.ChatCompletionResponse) error) error {
	events := openai.NewEventReader(body, maxFrameBytes)
	defer events.Release() // no payload is kept: send's events copy them
	var (
		finish inferencev1.FinishReason
		use    *openai.Usage
		// c is each chunk in turn, decoded afresh into the array of
		// choices the one before it used. The strings every chunk
		// repeats (id, object, model) seldom cost an allocation: the
		// decoder interns strings, in a cache its pool keeps between
		// calls.
		c openai.ChatCompletionChunk
	)
	for {
		data, err := events.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return streamBroken("the stream ended before data: [DONE]")
			}
			return frameError(err)
		}
		if string(data) == openai.Done {
			// Read the body's end (the chunked encoding's last chunk), so
			// that the connection goes back to the pool instead of being
			// closed.
			events.Discard(maxDrainBytes)
			break
		}
		c = openai.ChatCompletionChunk{Choices: c.Choices[:0]}
		if err := jsonv2.Unmarshal(data, &c); err != nil {
			return streamBroken("an event of the stream is not a completion chunk: %v", err)
		}
		if len(c.Error) > 0 && string(c.Error) != "null" {
			return streamBroken("the model server failed the completion: %s", errorText(json.RawMessage(c.Error), nil))
		}
		if c.Usage != nil {
			use = c.Usage
		}
		for _, ch := range c.Choices {
			if ch.Index != 0 {
				return streamBroken("the stream holds choice %d; one was asked for", ch.Index)
			}
			ev := &inferencev1.ChatCompletionResponse{}
			if ch.Delta.Content != nil {
				ev.Content = *ch.Delta.Content
			}
			switch {
			case ch.Delta.Reasoning != nil:
				ev.Reasoning = *ch.Delta.Reasoning
			case ch.Delta.ReasoningContent != nil:
				ev.Reasoning = *ch.Delta.ReasoningContent
			}
			for _, tc := range ch.Delta.ToolCalls {
				if tc.ID == "" && tc.Function.Name == "" && tc.Function.Arguments == "" {
					continue // vLLM's closing piece of a named call carries nothing
				}
				ev.ToolCalls = append(ev.ToolCalls, &inferencev1.ToolCallDelta{
					Index: int32(tc.Index), Id: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments,
				})
			}
			if ev.Content != "" || ev.Reasoning != "" || len(ev.ToolCalls) > 0 {
				if err := send(ev); err != nil {
					return err
				}
			}
			if ch.FinishReason != nil {
				f, ok := finishReasons[*ch.FinishReason]
				if !ok {
					return streamBroken("the completion finished for a reason not known: %q", *ch.FinishReason)
				}
				finish = f
			}
		}
	}
	switch {
	case finish == inferencev1.FinishReason_FINISH_REASON_UNSPECIFIED:
		return streamBroken("the stream ended without a finish reason")
	case use == nil:
		return streamBroken("the stream ended without usage")
	case use.PromptTokens < 0 || use.CompletionTokens < 0:
		return streamBroken("the stream's usage is negative")
	}
	return send(&inferencev1.ChatCompletionResponse{
		FinishReason: finish,
		Usage:        &inferencev1.Usage{PromptTokens: use.PromptTokens, CompletionTokens: use.CompletionTokens},
	})
}

// relayWhole turns the server's whole reply into the engine's events: one
// with the content, reasoning and tool calls (each call whole, in one
// piece with its id and name), then one with the finish reason and usage.
func relayWhole(resp *http.Response, send func(*inferencev1.ChatCompletionResponse) error) error {
	var c openai.ChatCompletion
	if err := decodeBody(resp, maxWholeBytes, &c); err != nil {
		return err
	}
	if len(c.Choices) != 1 || c.Choices[0].Index != 0 {
		return streamBroken("the reply holds %d choices; one was asked for", len(c.Choices))
	}
	ch := c.Choices[0]
	finish, ok := finishReasons[ch.FinishReason]
	if !ok {
		return streamBroken("the completion finished for a reason not known: %q", ch.FinishReason)
	}
	if c.Usage.PromptTokens < 0 || c.Usage.CompletionTokens < 0 {
		return streamBroken("the reply's usage is negative")
	}
	ev := &inferencev1.ChatCompletionResponse{Reasoning: ch.Message.Reasoning}
	if ev.Reasoning == "" {
		ev.Reasoning = ch.Message.ReasoningContent
	}
	if ch.Message.Content != nil {
		ev.Content = *ch.Message.Content
	}
	for i, tc := range ch.Message.ToolCalls {
		ev.ToolCalls = append(ev.ToolCalls, &inferencev1.ToolCallDelta{
			Index: int32(i), Id: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments,
		})
	}
	if ev.Content != "" || ev.Reasoning != "" || len(ev.ToolCalls) > 0 {
		if err := send(ev); err != nil {
			return err
		}
	}
	return send(&inferencev1.ChatCompletionResponse{
		FinishReason: finish,
		Usage:        &inferencev1.Usage{PromptTokens: c.Usage.PromptTokens, CompletionTokens: c.Usage.CompletionTokens},
	})
}

// maxDrainBytes bounds what is read past data: [DONE].
const maxDrainBytes = 4 << 10

var finishReasons = map[string]inferencev1.FinishReason{
	openai.FinishStop:          inferencev1.FinishReason_FINISH_REASON_STOP,
	openai.FinishLength:        inferencev1.FinishReason_FINISH_REASON_LENGTH,
	openai.FinishToolCalls:     inferencev1.FinishReason_FINISH_REASON_TOOL_CALLS,
	openai.FinishContentFilter: inferencev1.FinishReason_FINISH_REASON_CONTENT_FILTER,
}

// The members the engine sends the same in every request, made once: the
// role names, whose member is a pointer for the edge's sake (a missing role
// is not an empty one), the tool_choice modes and response_format types,
// and the stream options.
var (
	roles = map[inferencev1.Role]*string{
		inferencev1.Role_ROLE_SYSTEM: ref(openai.RoleSystem),
		// Open models' chat templates know system, not developer, which
		// OpenAI made its name for system instructions.
		inferencev1.Role_ROLE_DEVELOPER: ref(openai.RoleSystem),
		inferencev1.Role_ROLE_USER:      ref(openai.RoleUser),
		inferencev1.Role_ROLE_ASSISTANT: ref(openai.RoleAssistant),
		inferencev1.Role_ROLE_TOOL:      ref(openai.RoleTool),
	}
	noRole = ref("")

	toolChoiceNone     = openai.String(openai.ToolChoiceNone)
	toolChoiceAuto     = openai.String(openai.ToolChoiceAuto)
	toolChoiceRequired = openai.String(openai.ToolChoiceRequired)

	formatText       = ref(openai.ResponseFormatText)
	formatJSONObject = ref(openai.ResponseFormatJSONObject)
	formatJSONSchema = ref(openai.ResponseFormatJSONSchema)

	withUsage = &openai.StreamOptions{IncludeUsage: true}
)

func ref[T any](v T) *T { return &v }

func messages(in []*inferencev1.Message) []openai.Message {
	out := make([]openai.Message, len(in))
	for i, m := range in {
		role := roles[m.GetRole()]
		if role == nil {
			role = noRole
		}
		msg := openai.Message{Role: role, Name: m.GetName(), ToolCallID: m.GetToolCallId()}
		if r := m.GetReasoning(); r != "" {
			msg.Reasoning = &r
		}
		switch c := m.GetContent().(type) {
		case *inferencev1.Message_Text:
			msg.Content = openai.String(c.Text)
		case *inferencev1.Message_Parts:
			msg.Content = textParts(c.Parts.GetParts())
		}
		for _, tc := range m.GetToolCalls() {
			msg.ToolCalls = append(msg.ToolCalls, openai.ToolCall{
				ID: tc.GetId(), Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: tc.GetName(), Arguments: tc.GetArguments()},
			})
		}
		out[i] = msg
	}
	return out
}

func tools(in []*inferencev1.Tool) []openai.Tool {
	out := make([]openai.Tool, 0, len(in))
	for _, t := range in {
		def := openai.FunctionDefinition{Name: t.GetName(), Description: t.GetDescription(), Strict: t.Strict}
		if p := t.GetParametersJson(); p != "" {
			def.Parameters = jsontext.Value(p)
		}
		out = append(out, openai.Tool{Type: openai.ToolTypeFunction, Function: def})
	}
	return out
}

// toolChoice is tool_choice for the server. "none" or "auto" with no tool
// to choose from (a policy that removed every tool the client offered) is
// left out: vLLM refuses any tool_choice but "none" without tools ("When
// using `tool_choice`, `tools` must be set."), and with no tools the
// model calls none either way. "required" and a named function are sent
// as they are, so that the server refuses them when there is no tool.
func toolChoice(tc *inferencev1.ToolChoice, tools int) jsontext.Value {
	switch tc.GetMode() {
	case inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_NONE:
		if tools == 0 {
			return nil
		}
		return toolChoiceNone
	case inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_AUTO:
		if tools == 0 {
			return nil
		}
		return toolChoiceAuto
	case inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED:
		return toolChoiceRequired
	case inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_FUNCTION:
		return namedToolChoice(tc.GetFunctionName())
	}
	return nil
}

// format is response_format for the server, which enforces it by
// constraining its decoding (vLLM's structured outputs).
func format(rf *inferencev1.ResponseFormat) *openai.ResponseFormat {
	switch rf.GetType() {
	case inferencev1.ResponseFormatType_RESPONSE_FORMAT_TYPE_TEXT:
		return &openai.ResponseFormat{Type: formatText}
	case inferencev1.ResponseFormatType_RESPONSE_FORMAT_TYPE_JSON_OBJECT:
		return &openai.ResponseFormat{Type: formatJSONObject}
	case inferencev1.ResponseFormatType_RESPONSE_FORMAT_TYPE_JSON_SCHEMA:
		js := rf.GetJsonSchema()
		s := &openai.JSONSchema{Name: ref(js.GetName()), Description: js.GetDescription(), Strict: js.Strict}
		if js.GetSchemaJson() != "" {
			s.Schema = jsontext.Value(js.GetSchemaJson())
		}
		return &openai.ResponseFormat{Type: formatJSONSchema, JSONSchema: s}
	}
	return nil
}

// stop is the stop sequences as a JSON array; none is left out.
func stop(seqs []string) jsontext.Value {
	if len(seqs) == 0 {
		return nil
	}
	n := 2
	for _, s := range seqs {
		n += 3 + len(s)
	}
	b := append(make([]byte, 0, n), '[')
	for i, s := range seqs {
		if i > 0 {
			b = append(b, ',')
		}
		b = openai.AppendString(b, s)
	}
	return append(b, ']')
}

// logitBias is the contract's logit_bias with its token ids written as
// JSON's member names.
func logitBias(in map[int64]int32) map[string]int64 {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]int64, len(in))
	for tok, bias := range in {
		out[strconv.FormatInt(tok, 10)] = int64(bias)
	}
	return out
}

// rawJSON is a JSON text of the contract as a raw value; empty is none.
func rawJSON(s string) jsontext.Value {
	if s == "" {
		return nil
	}
	return jsontext.Value(s)
}

// The raw members the engine makes are written as encoding/json writes the
// structs they stand for ([]openai.ContentPart, openai.NamedToolChoice,
// []string), with openai.AppendString, without reflection: they are part of
// the request AppendJSON writes by hand (content_json_test.go holds them
// equal).

// textParts is a content of text parts.
func textParts(parts []*inferencev1.ContentPart) jsontext.Value {
	const head = `{"type":"` + openai.ContentPartText + `","text":`
	n := 2
	for _, p := range parts {
		n += len(head) + 3 + len(p.GetText())
	}
	b := append(make([]byte, 0, n), '[')
	for i, p := range parts {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, head...)
		b = openai.AppendString(b, p.GetText())
		b = append(b, '}')
	}
	return append(b, ']')
}

// namedToolChoice is a tool_choice that names a function.
func namedToolChoice(name string) jsontext.Value {
	const head = `{"type":"` + openai.ToolTypeFunction + `","function":{"name":`
	b := append(make([]byte, 0, len(head)+len(name)+4), head...)
	b = openai.AppendString(b, name)
	return append(b, "}}"...)
}
