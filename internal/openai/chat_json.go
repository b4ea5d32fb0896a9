package openai

import "strconv"

// AppendJSON appends c's JSON exactly as encoding/json writes it, without
// reflection: every plain chat reply is encoded once, and encoding/json's
// walk of the struct was about 1 % of the gateway's CPU per proxied
// request. chat_json_test.go holds the bytes equal to encoding/json's;
// change the struct and this together.
func (c *ChatCompletion) AppendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = AppendString(b, c.ID)
	b = append(b, `,"object":`...)
	b = AppendString(b, c.Object)
	b = append(b, `,"created":`...)
	b = strconv.AppendInt(b, c.Created, 10)
	b = append(b, `,"model":`...)
	b = AppendString(b, c.Model)
	b = append(b, `,"choices":`...)
	if c.Choices == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range c.Choices {
			if i > 0 {
				b = append(b, ',')
			}
			b = c.Choices[i].appendJSON(b)
		}
		b = append(b, ']')
	}
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, c.Usage.PromptTokens, 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, c.Usage.CompletionTokens, 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, c.Usage.TotalTokens, 10)
	return append(b, "}}"...)
}

func (ch *Choice) appendJSON(b []byte) []byte {
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(ch.Index), 10)
	b = append(b, `,"message":`...)
	b = ch.Message.appendJSON(b)
	b = append(b, `,"finish_reason":`...)
	b = AppendString(b, ch.FinishReason)
	b = append(b, `,"logprobs":`...)
	b = appendEmptyOrNull(b, ch.Logprobs)
	return append(b, '}')
}

func (m *ResponseMessage) appendJSON(b []byte) []byte {
	b = append(b, `{"role":`...)
	b = AppendString(b, m.Role)
	b = append(b, `,"content":`...)
	b = appendStringOrNull(b, m.Content)
	b = append(b, `,"refusal":`...)
	b = appendStringOrNull(b, m.Refusal)
	if len(m.ToolCalls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i := range m.ToolCalls {
			if i > 0 {
				b = append(b, ',')
			}
			tc := &m.ToolCalls[i]
			b = append(b, `{"id":`...)
			b = AppendString(b, tc.ID)
			b = append(b, `,"type":`...)
			b = AppendString(b, tc.Type)
			b = append(b, `,"function":{"name":`...)
			b = AppendString(b, tc.Function.Name)
			b = append(b, `,"arguments":`...)
			b = AppendString(b, tc.Function.Arguments)
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	if m.Reasoning != "" {
		b = append(b, `,"reasoning":`...)
		b = AppendString(b, m.Reasoning)
	}
	if m.ReasoningContent != "" {
		b = append(b, `,"reasoning_content":`...)
		b = AppendString(b, m.ReasoningContent)
	}
	return append(b, '}')
}

func appendStringOrNull(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return AppendString(b, *s)
}

func appendEmptyOrNull(b []byte, v *struct{}) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	return append(b, "{}"...)
}
