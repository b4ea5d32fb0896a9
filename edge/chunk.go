package edge

import (
	"strconv"

	"github.com/tollgate-dev/tollgate/internal/openai"
)

// chunkEncoder writes the JSON of chat.completion.chunk events into one
// reused buffer, without reflection: a streamed reply is many small events,
// and everything but the delta is the same in all of them. The bytes are
// exactly what encoding/json makes of openai.ChatCompletionChunk, which
// chunk_internal_test.go checks; change both together. It also writes the
// "usage":null that OpenAI puts on every chunk of a stream with
// include_usage, which the struct cannot hold.
type chunkEncoder struct {
	head []byte // {"id":…,"object":…,"created":…,"model":…,"choices":
	tail []byte // ,"usage":null} with include_usage, } without
	buf  []byte
}

func newChunkEncoder(id string, created int64, model string, includeUsage bool) *chunkEncoder {
	head := make([]byte, 0, 96+len(id)+len(model))
	head = append(head, `{"id":`...)
	head = openai.AppendString(head, id)
	head = append(head, `,"object":"chat.completion.chunk","created":`...)
	head = strconv.AppendInt(head, created, 10)
	head = append(head, `,"model":`...)
	head = openai.AppendString(head, model)
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

// role is the first chunk of a reply that opens with text (or reasoning):
// {"role":"assistant","content":""}. One that opens with a tool call
// starts with roleToolCall instead.
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
	e.buf = openai.AppendString(e.buf, text)
	e.buf = append(e.buf, '}')
	return e.close()
}

// toolCall is a chunk carrying a piece of tool call index. The first piece
// of a call has its id (and then its type) and name; later pieces only
// argument text.
func (e *chunkEncoder) toolCall(index int, id, name, arguments string) []byte {
	return e.toolCallAfter(`{`, index, id, name, arguments)
}

// roleToolCall is the first chunk of a reply whose first piece is a tool
// call, as OpenAI sends it: the role, "content":null (there is no text,
// and "" would give a client an empty text part) and that piece, in one
// delta.
func (e *chunkEncoder) roleToolCall(index int, id, name, arguments string) []byte {
	return e.toolCallAfter(`{"role":"assistant","content":null,`, index, id, name, arguments)
}

// toolCallAfter is a tool-call chunk whose delta opens with open.
func (e *chunkEncoder) toolCallAfter(open string, index int, id, name, arguments string) []byte {
	e.buf = append(append(e.buf[:0], e.head...), choiceOpen...)
	e.buf = append(e.buf, open...)
	e.buf = append(e.buf, `"tool_calls":[{"index":`...)
	e.buf = strconv.AppendInt(e.buf, int64(index), 10)
	if id != "" {
		e.buf = append(e.buf, `,"id":`...)
		e.buf = openai.AppendString(e.buf, id)
		e.buf = append(e.buf, `,"type":"function"`...)
	}
	e.buf = append(e.buf, `,"function":{`...)
	if name != "" {
		e.buf = append(e.buf, `"name":`...)
		e.buf = openai.AppendString(e.buf, name)
		e.buf = append(e.buf, ',')
	}
	e.buf = append(e.buf, `"arguments":`...)
	e.buf = openai.AppendString(e.buf, arguments)
	e.buf = append(e.buf, `}}]}`...)
	return e.close()
}

// finish is the chunk with an empty delta and the finish reason.
func (e *chunkEncoder) finish(reason string) []byte {
	e.buf = append(append(e.buf[:0], e.head...), choiceOpen...)
	e.buf = append(e.buf, `{}`...)
	e.buf = append(e.buf, choiceFinished...)
	e.buf = openai.AppendString(e.buf, reason)
	e.buf = append(e.buf, choiceClose...)
	e.buf = append(e.buf, e.tail...)
	return e.buf
}

// usage is the extra last chunk of include_usage: no choices, the usage.
func (e *chunkEncoder) usage(u openai.Usage) []byte {
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
