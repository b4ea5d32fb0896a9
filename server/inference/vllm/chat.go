package vllm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"

	jsonv2 "github.com/go-json-experiment/json"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
)

// ChatCompletion implements inference.Engine. The server's completion is
// always streamed, with usage, whatever the client asked: the engine's
// reply is a stream of events either way, and the usage chunk is what
// settles the key's tokens.
func (e *Engine) ChatCompletion(ctx context.Context, req *inferencev1.ChatCompletionRequest, send func(*inferencev1.ChatCompletionResponse) error) error {
	model, err := e.upstreamModel(req.GetModel(), inferencev1.ModelKind_MODEL_KIND_CHAT)
	if err != nil {
		return err
	}
	body := chatRequest{
		Model:              model,
		Messages:           messages(req.GetMessages()),
		Tools:              tools(req.GetTools()),
		ToolChoice:         toolChoice(req.GetToolChoice(), len(req.GetTools())),
		Temperature:        req.Temperature,
		TopP:               req.TopP,
		MaxTokens:          req.MaxTokens,
		Stop:               req.GetStop(),
		Seed:               req.Seed,
		FrequencyPen:       req.FrequencyPenalty,
		PresencePen:        req.PresencePenalty,
		LogitBias:          req.GetLogitBias(),
		ResponseFormat:     format(req.GetResponseFormat()),
		ChatTemplateKwargs: rawJSON(req.GetChatTemplateKwargsJson()),
		ReasoningEffort:    req.ReasoningEffort,
		Stream:             true,
		StreamOptions:      &streamOptions{IncludeUsage: true},
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the server's generation when the caller stops early
	resp, err := e.post(ctx, "chat", "/v1/chat/completions", body, req.GetModel(), req.GetRequestId())
	if err != nil {
		e.cfg.Metrics.observe(e.cfg.Namespace, "chat", err)
		return err
	}
	defer resp.Body.Close()
	callerStopped := false
	err = relay(resp.Body, func(ev *inferencev1.ChatCompletionResponse) error {
		err := send(ev)
		callerStopped = err != nil
		return err
	})
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
	r := bufio.NewReaderSize(body, 64<<10)
	var (
		finish inferencev1.FinishReason
		use    *usage
	)
	for {
		line, err := readLine(r)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return streamBroken("the stream ended before data: [DONE]")
			}
			return frameError(err)
		}
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue // blank separators, comments, other SSE fields
		}
		data = bytes.TrimPrefix(data, []byte(" "))
		if string(data) == "[DONE]" {
			// Read the body's end (the chunked encoding's last chunk), so
			// that the connection goes back to the pool instead of being
			// closed.
			_, _ = io.CopyN(io.Discard, r, maxDrainBytes)
			break
		}
		var c chunk
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

// maxDrainBytes bounds what is read past data: [DONE].
const maxDrainBytes = 4 << 10

var finishReasons = map[string]inferencev1.FinishReason{
	"stop":           inferencev1.FinishReason_FINISH_REASON_STOP,
	"length":         inferencev1.FinishReason_FINISH_REASON_LENGTH,
	"tool_calls":     inferencev1.FinishReason_FINISH_REASON_TOOL_CALLS,
	"content_filter": inferencev1.FinishReason_FINISH_REASON_CONTENT_FILTER,
}

// readLine returns the next line without its end (\n, \r\n or \r\n\r...),
// errFrameTooLong past maxFrameBytes.
func readLine(r *bufio.Reader) ([]byte, error) {
	part, err := r.ReadSlice('\n')
	if err == nil {
		return bytes.TrimRight(part, "\r\n"), nil // valid until the next read
	}
	line := append([]byte(nil), part...)
	for errors.Is(err, bufio.ErrBufferFull) {
		if len(line) > maxFrameBytes {
			return nil, errFrameTooLong
		}
		part, err = r.ReadSlice('\n')
		line = append(line, part...)
	}
	switch {
	case len(line) > maxFrameBytes:
		return nil, errFrameTooLong
	case err == nil, errors.Is(err, io.EOF) && len(line) > 0:
		return bytes.TrimRight(line, "\r\n"), nil
	}
	return nil, err
}

var roles = map[inferencev1.Role]string{
	inferencev1.Role_ROLE_SYSTEM: "system",
	// Open models' chat templates know system, not developer, which
	// OpenAI made its name for system instructions.
	inferencev1.Role_ROLE_DEVELOPER: "system",
	inferencev1.Role_ROLE_USER:      "user",
	inferencev1.Role_ROLE_ASSISTANT: "assistant",
	inferencev1.Role_ROLE_TOOL:      "tool",
}

func messages(in []*inferencev1.Message) []message {
	out := make([]message, len(in))
	for i, m := range in {
		msg := message{Role: roles[m.GetRole()], Name: m.GetName(), ToolCallID: m.GetToolCallId(), Reasoning: m.GetReasoning()}
		switch c := m.GetContent().(type) {
		case *inferencev1.Message_Text:
			msg.Content = c.Text
		case *inferencev1.Message_Parts:
			parts := make([]contentPart, len(c.Parts.GetParts()))
			for j, p := range c.Parts.GetParts() {
				parts[j] = contentPart{Type: "text", Text: p.GetText()}
			}
			msg.Content = parts
		}
		for _, tc := range m.GetToolCalls() {
			msg.ToolCalls = append(msg.ToolCalls, toolCall{
				ID: tc.GetId(), Type: "function",
				Function: functionCall{Name: tc.GetName(), Arguments: tc.GetArguments()},
			})
		}
		out[i] = msg
	}
	return out
}

func tools(in []*inferencev1.Tool) []tool {
	out := make([]tool, 0, len(in))
	for _, t := range in {
		def := functionDef{Name: t.GetName(), Description: t.GetDescription(), Strict: t.Strict}
		if p := t.GetParametersJson(); p != "" {
			def.Parameters = json.RawMessage(p)
		}
		out = append(out, tool{Type: "function", Function: def})
	}
	return out
}

// toolChoice is tool_choice for the server. "none" or "auto" with no tool
// to choose from (a policy that removed every tool the client offered) is
// left out: vLLM refuses any tool_choice but "none" without tools ("When
// using `tool_choice`, `tools` must be set."), and with no tools the
// model calls none either way. "required" and a named function are sent
// as they are, so that the server refuses them when there is no tool.
func toolChoice(tc *inferencev1.ToolChoice, tools int) any {
	switch tc.GetMode() {
	case inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_NONE:
		if tools == 0 {
			return nil
		}
		return "none"
	case inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_AUTO:
		if tools == 0 {
			return nil
		}
		return "auto"
	case inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED:
		return "required"
	case inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_FUNCTION:
		var n namedToolChoice
		n.Type = "function"
		n.Function.Name = tc.GetFunctionName()
		return n
	}
	return nil
}

// format is response_format for the server, which enforces it by
// constraining its decoding (vLLM's structured outputs).
func format(rf *inferencev1.ResponseFormat) *responseFormat {
	switch rf.GetType() {
	case inferencev1.ResponseFormatType_RESPONSE_FORMAT_TYPE_TEXT:
		return &responseFormat{Type: "text"}
	case inferencev1.ResponseFormatType_RESPONSE_FORMAT_TYPE_JSON_OBJECT:
		return &responseFormat{Type: "json_object"}
	case inferencev1.ResponseFormatType_RESPONSE_FORMAT_TYPE_JSON_SCHEMA:
		js := rf.GetJsonSchema()
		s := &jsonSchema{Name: js.GetName(), Description: js.GetDescription(), Strict: js.Strict}
		if js.GetSchemaJson() != "" {
			s.Schema = json.RawMessage(js.GetSchemaJson())
		}
		return &responseFormat{Type: "json_schema", JSONSchema: s}
	}
	return nil
}

// rawJSON is a JSON text of the contract as a raw value; empty is none.
func rawJSON(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}
