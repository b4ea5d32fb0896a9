package vllm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/internal/readsized"
)

// pconn is one kept-alive connection to a server, used by one request at
// a time.
type pconn struct {
	pool *connPool
	conn net.Conn // what requests are written to: raw, or TLS over it
	raw  net.Conn // the TCP connection
	br   *bufio.Reader
	bw   *bufio.Writer

	reused    bool      // it served a request before this one
	idleSince time.Time // when it was put back
	// What the current request wrote and read, for a retry's decision.
	written, read int64
}

// Read reads from the connection, counting (the reader under br).
func (pc *pconn) Read(b []byte) (int, error) {
	n, err := pc.conn.Read(b)
	pc.read += int64(n)
	return n, err
}

// countingWriter is the writer under bw: pconn's Write would make it an
// io.Writer and io.ReadWriter, which http.ReadResponse's bufio need not see.
type countingWriter struct{ pc *pconn }

func (w countingWriter) Write(b []byte) (int, error) {
	n, err := w.pc.conn.Write(b)
	w.pc.written += int64(n)
	return n, err
}

func (pc *pconn) close() { _ = pc.conn.Close() }

// interrupt makes a read or write blocked on the connection fail: the
// request's context ended.
func (pc *pconn) interrupt() { _ = pc.conn.SetDeadline(aLongTimeAgo) }

var aLongTimeAgo = time.Unix(1, 0)

// alive says whether an idle connection can serve a request: the server
// sent nothing since the last response and has not closed it.
func (pc *pconn) alive() bool {
	return pc.br.Buffered() == 0 && peekAlive(pc.raw)
}

// roundTrip writes req and reads its response's header. The body is read
// through the connection; reading it to its end returns the connection to
// the pool, and any other end closes it. Until then, the end of ctx
// interrupts the connection (context.AfterFunc: no goroutine unless ctx
// ends).
func (pc *pconn) roundTrip(ctx context.Context, req *http.Request) (*http.Response, error) {
	pc.written, pc.read = 0, 0
	stop := noStop
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, pc.interrupt)
	}
	err := writeRequest(pc.bw, req)
	if err == nil {
		err = pc.bw.Flush()
	}
	if err != nil {
		// A server may answer before it has read the whole body (a 413
		// or a 400 on the header alone) and close the connection, which
		// fails the write: its answer is the request's, as with
		// net/http, which reads while it writes. Nothing written: no
		// answer on the connection can be to this request.
		var early *http.Response
		if pc.written > 0 && ctx.Err() == nil {
			early = pc.earlyAnswer(req)
		}
		stopped := stop()
		pc.pool.discard(pc)
		if early != nil && stopped {
			return early, nil
		}
		return nil, failed(ctx, fmt.Errorf("writing the request: %w", err), pc.written == 0, pc.read == 0)
	}
	resp, err := pc.readHeader(req)
	if err != nil {
		stop()
		pc.pool.discard(pc)
		return nil, failed(ctx, fmt.Errorf("reading the response: %w", err), false, pc.read == 0)
	}
	b := &connBody{rc: resp.Body, pc: pc, ctx: ctx, stop: stop, reuse: !resp.Close && !req.Close}
	if resp.Body == http.NoBody {
		b.finish(true)
	}
	resp.Body = b
	return resp, nil
}

func noStop() bool { return true }

// readHeader reads the header of req's response, past any informational
// (1xx) answer.
func (pc *pconn) readHeader(req *http.Request) (*http.Response, error) {
	resp, err := http.ReadResponse(pc.br, req)
	for err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
		resp, err = http.ReadResponse(pc.br, req) // an informational answer: the real one follows
	}
	return resp, err
}

// earlyAnswer is the response to req already on the connection when
// writing req failed, or nil: a complete header and body (at most
// maxEarlyBodyBytes, read here, since the connection is closed next)
// arriving within earlyAnswerWait. A server that answered before closing
// sent its answer ahead of its close, so the answer is, in practice,
// already received when the write fails, and a connection closed without
// one ends the read at once; the wait only bounds the rest.
func (pc *pconn) earlyAnswer(req *http.Request) *http.Response {
	if pc.conn.SetReadDeadline(time.Now().Add(earlyAnswerWait)) != nil {
		return nil
	}
	resp, err := pc.readHeader(req)
	if err != nil {
		return nil
	}
	body, err := readsized.ReadAll(resp.Body, resp.ContentLength, maxEarlyBodyBytes)
	_ = resp.Body.Close()
	if err != nil || len(body) > maxEarlyBodyBytes {
		return nil
	}
	resp.Body = http.NoBody
	if len(body) > 0 {
		resp.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp.Close = true
	return resp
}

// earlyAnswerWait bounds the read of an answer after a failed write, and
// maxEarlyBodyBytes its body: an error's, which the engine reads at most
// maxErrorBytes of.
const (
	earlyAnswerWait   = 50 * time.Millisecond
	maxEarlyBodyBytes = maxErrorBytes
)

// failed is a round trip's error: the context's when it ended.
func failed(ctx context.Context, err error, nothingWritten, noResponse bool) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		err = ctxErr
	} else {
		err = fmt.Errorf("vllm transport: %w", err)
	}
	return &roundTripError{err: err, nothingWritten: nothingWritten, noResponse: noResponse}
}

// connBody is a response's body. Read to its end (io.EOF), it gives the
// connection back to the pool, unless the response or request said
// Connection: close; a read error or a Close before the end closes it.
type connBody struct {
	rc    io.ReadCloser // http.ReadResponse's body, reading pc.br
	pc    *pconn
	ctx   context.Context
	stop  func() bool
	reuse bool
	state atomic.Int32 // bodyOpen, bodyEOF, bodyClosed
}

const (
	bodyOpen = iota
	bodyEOF
	bodyClosed
)

var errBodyClosed = errors.New("vllm transport: read on a closed response body")

func (b *connBody) Read(p []byte) (int, error) {
	switch b.state.Load() {
	case bodyEOF:
		return 0, io.EOF
	case bodyClosed:
		return 0, errBodyClosed
	}
	n, err := b.rc.Read(p)
	switch {
	case errors.Is(err, io.EOF):
		b.finish(true)
	case err != nil:
		b.finish(false)
		if ctxErr := b.ctx.Err(); ctxErr != nil {
			err = ctxErr
		}
	}
	return n, err
}

// Close implements io.Closer: before the body's end, the connection is
// closed (what was not read cannot be told from the next response).
func (b *connBody) Close() error {
	b.finish(false)
	return nil
}

// finish ends the body once: at its end (eof) the connection goes back to
// the pool if it can serve another request, else it is closed.
func (b *connBody) finish(eof bool) {
	to := int32(bodyClosed)
	if eof {
		to = bodyEOF
	}
	if !b.state.CompareAndSwap(bodyOpen, to) {
		return
	}
	// stop false: the context ended and interrupt ran or runs; the
	// connection's deadline is past.
	if stopped := b.stop(); eof && stopped && b.reuse {
		b.pc.pool.put(b.pc)
		return
	}
	b.pc.pool.discard(b.pc)
}
