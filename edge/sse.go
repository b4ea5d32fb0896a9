package edge

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// sseWriter writes Server-Sent Events exactly as OpenAI does: each event is
// `data: <json>\n\n`, flushed at once; no comments, no `event:` lines.
type sseWriter struct {
	w       http.ResponseWriter
	flusher http.Flusher
	buf     []byte
	err     error // first write error; the client has gone
	// sent keeps every byte written, for the audit event, when keepSent.
	keepSent bool
	sent     bytes.Buffer
}

func newSSEWriter(w http.ResponseWriter, keepSent bool) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sseWriter{w: w, flusher: f, keepSent: keepSent}
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
	s.buf = append(s.buf[:0], "data: "...)
	s.buf = append(s.buf, payload...)
	s.buf = append(s.buf, "\n\n"...)
	if s.keepSent {
		s.sent.Write(s.buf)
	}
	if _, s.err = s.w.Write(s.buf); s.err != nil {
		return s.err
	}
	if s.flusher != nil {
		s.flusher.Flush()
	}
	return nil
}

// keep adds the event that payload will make to the kept bytes ahead of
// writing it, so the audit record can hold it before the client sees it.
func (s *sseWriter) keep(payload []byte) {
	if s.keepSent {
		s.sent.WriteString("data: ")
		s.sent.Write(payload)
		s.sent.WriteString("\n\n")
		s.keepSent = false // raw must not add it twice
	}
}
