package edge

import (
	"strconv"
	"unicode/utf8"
)

// chunkEncoder writes the JSON of chat.completion.chunk events into one
// reused buffer, without reflection: a streamed reply is many small events,
// and everything but the delta is the same in all of them. The bytes are
// exactly what encoding/json makes of chatChunk (wire.go), which
// chunk_internal_test.go checks; change both together.
type chunkEncoder struct {
	head []byte // {"id":…,"object":…,"created":…,"model":…,"choices":
	tail []byte // ,"usage":null} with include_usage, } without
	buf  []byte
}

func newChunkEncoder(id string, created int64, model string, includeUsage bool) *chunkEncoder {
	head := make([]byte, 0, 96+len(id)+len(model))
	head = append(head, `{"id":`...)
	head = appendJSONString(head, id)
	head = append(head, `,"object":"chat.completion.chunk","created":`...)
	head = strconv.AppendInt(head, created, 10)
	head = append(head, `,"model":`...)
	head = appendJSONString(head, model)
	head = append(head, `,"choices":`...)
	tail := []byte(`}`)
	if includeUsage {
		tail = []byte(`,"usage":null}`)
	}
	return &chunkEncoder{head: head, tail: tail, buf: make([]byte, 0, 256)}
}

// The choice around a delta: its opening, and its closing with or without
// a finish reason.
const (
	choiceOpen     = `[{"index":0,"delta":`
	choiceOpenEnd  = `,"finish_reason":null,"logprobs":null}]`
	choiceFinished = `,"finish_reason":`
	choiceClose    = `,"logprobs":null}]`
)

// role is the first chunk: {"role":"assistant","content":""}.
func (e *chunkEncoder) role() []byte {
	e.buf = append(append(e.buf[:0], e.head...), choiceOpen...)
	e.buf = append(e.buf, `{"role":"assistant","content":""}`...)
	return e.close()
}

// content is a chunk carrying a piece of the reply's text.
func (e *chunkEncoder) content(text string) []byte { return e.text(`{"content":`, text) }

// reasoning is a chunk carrying a piece of a reasoning model's reasoning.
func (e *chunkEncoder) reasoning(text string) []byte { return e.text(`{"reasoning":`, text) }

// text is a chunk whose delta is one string field, opened by field.
func (e *chunkEncoder) text(field, text string) []byte {
	e.buf = append(append(e.buf[:0], e.head...), choiceOpen...)
	e.buf = append(e.buf, field...)
	e.buf = appendJSONString(e.buf, text)
	e.buf = append(e.buf, '}')
	return e.close()
}

// toolCall is a chunk carrying a piece of tool call index. The first piece
// of a call has its id (and then its type) and name; later pieces only
// argument text.
func (e *chunkEncoder) toolCall(index int, id, name, arguments string) []byte {
	e.buf = append(append(e.buf[:0], e.head...), choiceOpen...)
	e.buf = append(e.buf, `{"tool_calls":[{"index":`...)
	e.buf = strconv.AppendInt(e.buf, int64(index), 10)
	if id != "" {
		e.buf = append(e.buf, `,"id":`...)
		e.buf = appendJSONString(e.buf, id)
		e.buf = append(e.buf, `,"type":"function"`...)
	}
	e.buf = append(e.buf, `,"function":{`...)
	if name != "" {
		e.buf = append(e.buf, `"name":`...)
		e.buf = appendJSONString(e.buf, name)
		e.buf = append(e.buf, ',')
	}
	e.buf = append(e.buf, `"arguments":`...)
	e.buf = appendJSONString(e.buf, arguments)
	e.buf = append(e.buf, `}}]}`...)
	return e.close()
}

// finish is the chunk with an empty delta and the finish reason.
func (e *chunkEncoder) finish(reason string) []byte {
	e.buf = append(append(e.buf[:0], e.head...), choiceOpen...)
	e.buf = append(e.buf, `{}`...)
	e.buf = append(e.buf, choiceFinished...)
	e.buf = appendJSONString(e.buf, reason)
	e.buf = append(e.buf, choiceClose...)
	e.buf = append(e.buf, e.tail...)
	return e.buf
}

// usage is the extra last chunk of include_usage: no choices, the usage.
func (e *chunkEncoder) usage(u usage) []byte {
	e.buf = append(append(e.buf[:0], e.head...), `[],"usage":{"prompt_tokens":`...)
	e.buf = strconv.AppendInt(e.buf, u.PromptTokens, 10)
	e.buf = append(e.buf, `,"completion_tokens":`...)
	e.buf = strconv.AppendInt(e.buf, u.CompletionTokens, 10)
	e.buf = append(e.buf, `,"total_tokens":`...)
	e.buf = strconv.AppendInt(e.buf, u.TotalTokens, 10)
	e.buf = append(e.buf, `}}`...)
	return e.buf
}

// close ends a chunk whose delta has been written and that does not finish.
func (e *chunkEncoder) close() []byte {
	e.buf = append(e.buf, choiceOpenEnd...)
	e.buf = append(e.buf, e.tail...)
	return e.buf
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string exactly as encoding/json
// writes it: HTML-safe (<, > and & as \u00XX), control characters escaped,
// invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
