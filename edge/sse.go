package edge

import (
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
}

func newSSEWriter(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sseWriter{w: w, flusher: f}
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
	if _, s.err = s.w.Write(s.buf); s.err != nil {
		return s.err
	}
	if s.flusher != nil {
		s.flusher.Flush()
	}
	return nil
}

// done writes the terminating `data: [DONE]` event.
func (s *sseWriter) done() error { return s.raw([]byte("[DONE]")) }
