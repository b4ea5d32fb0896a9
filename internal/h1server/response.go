package h1server

import (
	"errors"
	"log/slog"
	"net/http"
	"path"
	"runtime"
	"strconv"
	"time"
)

// bufferBeforeChunking is how much of a body is held back before its
// framing is chosen, as net/http does: a handler that returns having
// written no more (and never flushed) is sent with a Content-Length.
const bufferBeforeChunking = 2048

var errHandlerDone = errors.New("h1server: write after the handler returned")

// response is the http.ResponseWriter of one request. It implements
// http.Flusher and what http.ResponseController looks for: FlushError,
// SetReadDeadline, SetWriteDeadline and EnableFullDuplex (not supported).
type response struct {
	c      *conn
	req    *http.Request
	body   reqBody
	header http.Header

	status      int
	wroteHeader bool // a final status was set
	warnedTwice bool
	committed   bool // the status line and headers are in the connection's buffer
	handlerDone bool
	finished    bool

	// As of WriteHeader (hdr.go).
	snap snapshot

	contentLength   int64 // the declared body length, or -1
	written         int64
	chunking        bool
	closeAfterReply bool

	wantsClose       bool
	wants10KeepAlive bool
	expectContinue   bool // the client awaits 100 Continue before the body
	continueOK       bool // 100 Continue may still be sent
}

func (w *response) Header() http.Header { return w.header }

// WriteHeader sets the status. A 1xx status but 101 is sent at once with
// the headers set so far; a second final status is ignored and logged
// once.
func (w *response) WriteHeader(code int) {
	if w.wroteHeader {
		if !w.warnedTwice {
			w.warnedTwice = true
			_, file, line, _ := runtime.Caller(1)
			w.c.srv.logger().Warn("h1server: superfluous WriteHeader call",
				slog.String("caller", path.Base(file)+":"+strconv.Itoa(line)))
		}
		return
	}
	if code < 100 || code > 999 {
		panic("invalid WriteHeader code " + strconv.Itoa(code))
	}
	if code < 101 || code > 199 {
		w.disableContinue()
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		bw := w.c.bw
		writeStatusLine(bw, code, &w.c.scratch)
		w.c.hdr = appendHeader(w.c.hdr[:0], &w.c.keys, w.header, excludeFraming)
		_, _ = bw.Write(w.c.hdr)
		_, _ = bw.WriteString("\r\n")
		_ = bw.Flush()
		return
	}
	w.wroteHeader = true
	w.status = code
	w.takeSnapshot()
	if w.snap.contentLength != "" {
		v, err := strconv.ParseInt(w.snap.contentLength, 10, 64)
		if err == nil && v >= 0 {
			w.contentLength = v
		} else {
			w.c.srv.logger().Warn("h1server: invalid Content-Length", slog.String("value", w.snap.contentLength))
			w.snap.contentLength = ""
		}
	}
}

// Write sends p as part of the body: held back until bufferBeforeChunking
// bytes, then framed (Content-Length or chunked) and buffered.
func (w *response) Write(p []byte) (int, error) {
	if w.finished {
		return 0, errHandlerDone
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !bodyAllowedForStatus(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	w.written += int64(len(p))
	if w.contentLength != -1 && w.written > w.contentLength {
		return 0, http.ErrContentLength
	}
	c := w.c
	if !w.committed {
		if len(c.pending)+len(p) <= cap(c.pending) {
			c.pending = append(c.pending, p...)
			return len(p), nil
		}
		w.commit(sniffable(c.pending, p))
		if err := w.writeBody(c.pending); err != nil {
			return 0, err
		}
		c.pending = c.pending[:0]
	}
	if err := w.writeBody(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// sniffable is the start of the body, pending then p, for
// http.DetectContentType (which reads at most 512 bytes).
func sniffable(pending, p []byte) []byte {
	if len(pending) >= 512 || len(p) == 0 {
		return pending
	}
	if len(pending) == 0 {
		return p
	}
	var buf [512]byte
	n := copy(buf[:], pending)
	n += copy(buf[n:], p)
	return buf[:n]
}

// writeBody frames p (chunked or not) into the connection's buffer; a
// HEAD response's body is dropped.
func (w *response) writeBody(p []byte) error {
	if len(p) == 0 || w.req.Method == http.MethodHead {
		return nil
	}
	bw := w.c.bw
	if w.chunking {
		_, _ = bw.Write(strconv.AppendInt(w.c.scratch[:0], int64(len(p)), 16))
		_, _ = bw.WriteString("\r\n")
	}
	_, err := bw.Write(p)
	if w.chunking {
		_, err = bw.WriteString("\r\n")
	}
	return err
}

// Flush sends what is buffered.
func (w *response) Flush() { _ = w.FlushError() }

// FlushError sends what is buffered, committing the headers first.
func (w *response) FlushError() error {
	if w.finished {
		return errHandlerDone
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.committed {
		c := w.c
		w.commit(c.pending)
		err := w.writeBody(c.pending)
		c.pending = c.pending[:0]
		if err != nil {
			return err
		}
	}
	return w.c.bw.Flush()
}

// SetReadDeadline sets the connection's read deadline (the body's reads).
func (w *response) SetReadDeadline(t time.Time) error { return w.c.rwc.SetReadDeadline(t) }

// SetWriteDeadline sets the connection's write deadline.
func (w *response) SetWriteDeadline(t time.Time) error {
	w.c.writeDeadline = true
	return w.c.rwc.SetWriteDeadline(t)
}

// EnableFullDuplex is not supported: the body is not read once the
// response has started but by the handler itself.
func (w *response) EnableFullDuplex() error { return http.ErrNotSupported }

// sendContinue sends 100 Continue on the body's first read, unless a
// status was sent already.
func (w *response) sendContinue() {
	c := w.c
	c.continueMu.Lock()
	defer c.continueMu.Unlock()
	if !w.continueOK {
		return
	}
	w.continueOK = false
	_, _ = c.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
	_ = c.bw.Flush()
}

func (w *response) disableContinue() {
	if w.body.expect || w.continueOK {
		w.c.continueMu.Lock()
		w.continueOK = false
		w.c.continueMu.Unlock()
	}
}

// finish completes the response after the handler returned: the headers
// if not sent, the held-back body, the last chunk; then what the handler
// left of the request's body is drained (bounded) or the connection is
// marked for closing.
func (w *response) finish() {
	w.handlerDone = true
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	c := w.c
	if !w.committed {
		w.commit(c.pending)
		_ = w.writeBody(c.pending)
	}
	c.pending = c.pending[:0]
	if w.chunking {
		_, _ = c.bw.WriteString("0\r\n\r\n")
	}
	_ = c.bw.Flush()
	w.finished = true
	// As net/http closes the body: what is left, if under
	// maxPostHandlerReadBytes, is read under the deadline the handler
	// left, closing or not, so that the close does not reset the response;
	// unless the client awaits a 100 Continue that was never sent.
	if w.body.rc != nil && !w.body.eof && !w.body.expect {
		if ended, _ := w.body.discardRest(); !ended {
			w.closeAfterReply = true
		}
	}
}

// shouldReuse reports whether the connection may serve another request,
// as net/http decides.
func (w *response) shouldReuse() bool {
	switch {
	case w.closeAfterReply, w.c.werr != nil:
		return false
	case w.req.Method != http.MethodHead && w.contentLength != -1 && bodyAllowedForStatus(w.status) && w.contentLength != w.written:
		return false // the body sent is not the length announced
	case w.body.rc != nil && !w.body.eof:
		return false
	}
	return true
}

func bodyAllowedForStatus(status int) bool {
	switch {
	case status >= 100 && status <= 199:
		return false
	case status == http.StatusNoContent, status == http.StatusNotModified:
		return false
	}
	return true
}

var _ interface {
	http.ResponseWriter
	http.Flusher
	FlushError() error
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
	EnableFullDuplex() error
} = (*response)(nil)
