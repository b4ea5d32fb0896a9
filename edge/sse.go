package edge

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/tollgate-dev/tollgate/internal/openai"
)

// sseWriter writes Server-Sent Events exactly as OpenAI does: each event is
// `data: <json>\n\n` (openai.AppendEvent), flushed at once unless the
// next follows at once (more); no comments, no `event:` lines.
// Each event must be taken by the client within the stall bound
// (stallWriter); one that is not fails the stream as a client gone.
type sseWriter struct {
	out *stallWriter
	buf []byte
	err error // first write error; the client has gone, or stopped reading
	// sent keeps every byte written, for the audit event, when keepSent.
	keepSent bool
	sent     bytes.Buffer
	// more, when set, reports whether the next event follows at once
	// (pipeline.Reply.Ready): the event is then written without a flush,
	// the next one's flush sending both, so that events the engine
	// produced together cost the client one write and the gateway one
	// syscall. Nothing is left unflushed while the engine works. An
	// in-process stream's engine is pulled one event at a time, so its
	// events are flushed one by one.
	more func() bool
}

// startStream records durably that the stream is about to begin, before
// its 200 and first event (pipeline.Call.Start); a failure is answered
// as an internal error, nothing of the stream sent (ok false).
func (s *Server) startStream(w http.ResponseWriter, r *http.Request, rc *requestContext) bool {
	if err := rc.call.Start(r.Context()); err != nil {
		s.refuse(w, r, rc, err)
		return false
	}
	return true
}

func newSSEWriter(w http.ResponseWriter, out *stallWriter, keepSent bool) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &sseWriter{out: out, keepSent: keepSent}
}

// event writes one data event holding v as JSON.
func (s *sseWriter) event(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.raw(data)
}

// raw writes one data event with the given payload.
func (s *sseWriter) raw(payload []byte) error {
	if s.err != nil {
		return s.err
	}
	s.buf = openai.AppendEvent(s.buf[:0], payload)
	if s.keepSent {
		s.sent.Write(s.buf)
	}
	return s.send()
}

// keep adds the event that payload will make to the kept bytes ahead of
// writing it, so the audit record can hold it before the client sees it.
func (s *sseWriter) keep(payload []byte) {
	if s.keepSent {
		s.sent.Write(openai.AppendEvent(s.sent.AvailableBuffer(), payload))
		s.keepSent = false // raw must not add it twice
	}
}

// named writes one named event (`event:` and `data:` lines), as the
// Responses API's stream has them.
func (s *sseWriter) named(name string, payload []byte) error {
	if s.err != nil {
		return s.err
	}
	s.buf = openai.AppendNamedEvent(s.buf[:0], name, payload)
	if s.keepSent {
		s.sent.Write(s.buf)
	}
	return s.send()
}

// send writes the event in s.buf, flushed unless the next follows at once
// (more).
func (s *sseWriter) send() error {
	if s.more != nil && s.more() {
		s.err = s.out.write(s.buf)
	} else {
		s.err = s.out.writeFlush(s.buf)
	}
	return s.err
}

// keepNamed is keep for a named event.
func (s *sseWriter) keepNamed(name string, payload []byte) {
	if s.keepSent {
		s.sent.Write(openai.AppendNamedEvent(s.sent.AvailableBuffer(), name, payload))
		s.keepSent = false // named must not add it twice
	}
}
