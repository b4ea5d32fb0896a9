package h1server

import (
	"io"
	"net/http"
)

// reqBody is a request's body as the handler reads it: it sends
// 100 Continue on the first read if the client awaits it, arms the
// disconnect watch at the body's end, and never reads past it.
type reqBody struct {
	w      *response
	rc     io.ReadCloser // http.ReadRequest's body
	n      int64         // bytes read
	eof    bool
	closed bool
	expect bool // 100 Continue not sent yet
}

func (b *reqBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	if b.eof {
		return 0, io.EOF
	}
	if b.expect {
		b.expect = false
		b.w.sendContinue()
	}
	n, err := b.rc.Read(p)
	b.n += int64(n)
	if err == io.EOF { //nolint:errorlint // io.EOF is returned as is
		b.eof = true
		if !b.w.handlerDone {
			b.w.c.watch.arm(b.w.c)
		}
	}
	return n, err
}

// Close stops the handler's reads. It reads nothing: what is left is
// drained after the handler, bounded, or the connection is closed.
func (b *reqBody) Close() error {
	b.closed = true
	return nil
}

// discardRest reads and discards what is left of the body, up to
// maxPostHandlerReadBytes; it reports whether the body's end was reached.
func (b *reqBody) discardRest() (ended bool, tooBig bool) {
	if b.eof {
		return true, false
	}
	if b.closed {
		return false, false
	}
	if cl := b.w.req.ContentLength; cl > 0 && cl-b.n >= maxPostHandlerReadBytes {
		return false, true
	}
	b.expect = false
	_, err := io.CopyN(io.Discard, b, maxPostHandlerReadBytes+1)
	switch {
	case b.eof:
		return true, false
	case err == nil:
		return false, true
	default:
		return false, false
	}
}
