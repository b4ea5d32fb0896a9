package h1server

import (
	"fmt"
	"io"
)

// connReader is what the connection's bufio.Reader reads: the connection,
// under a byte limit while a request's headers are read, after the byte
// the disconnect watch may have taken (the next pipelined request's
// first). A failed read cancels the running request's context.
type connReader struct {
	c        *conn
	remain   int64 // bytes that may still be read; at 0, EOF
	hitLimit bool
	hasByte  bool
	b        byte
	err      error // the watch saw the connection end: every read fails
}

func (r *connReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if r.remain <= 0 {
		r.hitLimit = true
		return 0, io.EOF
	}
	if int64(len(p)) > r.remain {
		p = p[:r.remain]
	}
	if r.hasByte {
		p[0], r.hasByte = r.b, false
		r.remain--
		return 1, nil
	}
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.c.rwc.Read(p)
	r.remain -= int64(n)
	if err != nil && r.c.cancelReq != nil {
		// As net/http's: a failed read (the client gone, or a deadline
		// passed) cancels the request's context.
		r.c.cancelReq(fmt.Errorf("%w: %w", ErrClientGone, err))
	}
	return n, err
}

// connWriter is what the connection's bufio.Writer writes to: a failed
// write cancels the running request's context, as net/http's does, so a
// handler streaming to a client that is gone or stopped reading (past its
// write deadline) stops.
type connWriter struct{ c *conn }

func (w connWriter) Write(p []byte) (int, error) {
	n, err := w.c.rwc.Write(p)
	if err != nil && w.c.werr == nil {
		w.c.werr = err
		if w.c.cancelReq != nil {
			w.c.cancelReq(fmt.Errorf("%w: %w", ErrClientGone, err))
		}
	}
	return n, err
}
