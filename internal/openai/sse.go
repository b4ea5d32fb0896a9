package openai

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"sync"
)

// Done is the payload of a stream's last event.
const Done = "[DONE]"

// AppendEvent appends the data event of payload, `data: <payload>\n\n`,
// as OpenAI writes each event: one data line, no comments, no `event:`
// lines.
func AppendEvent[P string | []byte](dst []byte, payload P) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, payload...)
	return append(dst, "\n\n"...)
}

// AppendNamedEvent appends the named event of payload,
// `event: <name>\ndata: <payload>\n\n`, as OpenAI writes each event of a
// streamed response (the Responses API names its events).
func AppendNamedEvent[P string | []byte](dst []byte, name string, payload P) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, name...)
	dst = append(dst, '\n')
	return AppendEvent(dst, payload)
}

// ErrEventTooLong is EventReader's error for a line longer than its bound.
var ErrEventTooLong = errors.New("an event of the stream exceeds the bound")

// EventReader reads the data events of a Server-Sent Events stream as a
// model server sends a streamed completion: each event one `data:` line.
// Lines of other fields (`event:`, `id:`, `retry:`), comments and the
// blank lines between events are skipped; a data line's payload is taken
// alone (model servers send no event of several data lines).
type EventReader struct {
	r   *bufio.Reader
	max int
}

// eventReaderSize is the buffer of an EventReader: a chunk of a few tokens
// fits it whole, so a line is returned from it without a copy.
const eventReaderSize = 64 << 10

// eventBuffers keeps the buffers of released EventReaders: one per
// streamed completion would otherwise be allocated (and cleared) anew.
var eventBuffers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, eventReaderSize) }}

// NewEventReader reads r, refusing a line of more than maxLine bytes, its
// end included. Release gives its buffer back once the stream is read.
func NewEventReader(r io.Reader, maxLine int) *EventReader {
	br := eventBuffers.Get().(*bufio.Reader)
	br.Reset(r)
	return &EventReader{r: br, max: maxLine}
}

// Release returns the reader's buffer for another stream. Neither the
// reader nor a payload it returned may be used afterwards.
func (e *EventReader) Release() {
	if e.r == nil {
		return
	}
	e.r.Reset(nil)
	eventBuffers.Put(e.r)
	e.r = nil
}

// Next returns the payload of the next data event: the line after `data:`
// and one optional space. It is valid until the next call. At the end of
// the stream it returns io.EOF (a last line without its newline is still
// returned first); past the bound, ErrEventTooLong.
func (e *EventReader) Next() ([]byte, error) {
	for {
		line, err := e.readLine()
		if err != nil {
			return nil, err
		}
		if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			return bytes.TrimPrefix(data, []byte(" ")), nil
		}
	}
}

// Discard reads and drops at most n bytes of what follows, so that a
// response's body is read to its end (the chunked encoding's last chunk)
// and its connection can be reused.
func (e *EventReader) Discard(n int64) {
	_, _ = io.CopyN(io.Discard, e.r, n)
}

// readLine returns the next line without its end (\n, \r\n or \r\n\r...).
func (e *EventReader) readLine() ([]byte, error) {
	part, err := e.r.ReadSlice('\n')
	if err == nil {
		if len(part) > e.max {
			return nil, ErrEventTooLong
		}
		return bytes.TrimRight(part, "\r\n"), nil // valid until the next read
	}
	line := append([]byte(nil), part...)
	for errors.Is(err, bufio.ErrBufferFull) {
		if len(line) > e.max {
			return nil, ErrEventTooLong
		}
		part, err = e.r.ReadSlice('\n')
		line = append(line, part...)
	}
	switch {
	case len(line) > e.max:
		return nil, ErrEventTooLong
	case err == nil, errors.Is(err, io.EOF) && len(line) > 0:
		return bytes.TrimRight(line, "\r\n"), nil
	}
	return nil, err
}
