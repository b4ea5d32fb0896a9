package h1server

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Connection states, for Shutdown: an idle connection (waiting for a
// request, its first or the next) is closed at once, an active one is
// left to finish its request.
const (
	stateIdle int32 = iota
	stateActive
	stateClosed
)

// maxPostHandlerReadBytes is how much of a body the handler left unread
// is read and discarded to keep the connection, as net/http does; a
// larger rest closes it.
const maxPostHandlerReadBytes = 256 << 10

// lingerTimeout bounds the wait, after the response to a request whose
// body was left unread, for the client to see the response and close,
// before the connection is closed (a close with unread bytes sends a
// reset, which may destroy the response in the client's buffers).
const lingerTimeout = 500 * time.Millisecond

// ErrClientGone is the cause of a request's context canceled because its
// client went away: its connection was closed or failed while the handler
// ran, or a write to it failed.
var ErrClientGone = errors.New("h1server: the client went away")

// errUnsupportedVersion and the like are the requests answered by the
// server itself, before a handler.
type requestError struct {
	status  int
	message string
}

func (e *requestError) Error() string { return e.message }

// conn is one client connection, serving its requests in order.
type conn struct {
	srv        *Server
	rwc        net.Conn
	remoteAddr string
	tlsState   *tls.ConnectionState
	ctx        context.Context // the connection's; each request's derives from it
	cancel     context.CancelCauseFunc
	state      atomic.Int32

	r  connReader
	br *bufio.Reader
	bw *bufio.Writer

	// werr is the first write error; the connection is not reused.
	werr error
	// cancelReq cancels the running request's context; set before its
	// handler runs, it changes only between requests.
	cancelReq context.CancelCauseFunc

	pending []byte   // the response's body held back before framing
	hdr     []byte   // the response's headers as of WriteHeader
	keys    []string // scratch for sorting header keys
	scratch [20]byte // numbers formatted for the connection's buffer
	clen    [20]byte // a Content-Length set by the server

	continueMu    sync.Mutex // 100 Continue against the response's header
	writeDeadline bool       // the handler set one: cleared after its response
	lastPOST      bool
	watch         watch
}

func newConn(s *Server, rwc net.Conn, base context.Context) *conn {
	c := &conn{srv: s, rwc: rwc, remoteAddr: rwc.RemoteAddr().String()}
	c.ctx, c.cancel = context.WithCancelCause(context.WithValue(base, http.LocalAddrContextKey, rwc.LocalAddr()))
	c.r.c = c
	c.r.remain = math.MaxInt64
	c.br = bufio.NewReaderSize(&c.r, 4<<10)
	c.bw = bufio.NewWriterSize(connWriter{c}, 4<<10)
	c.pending = make([]byte, 0, bufferBeforeChunking)
	return c
}

// closeIfIdle closes c if it waits for a request (Shutdown).
func (c *conn) closeIfIdle() {
	if c.state.CompareAndSwap(stateIdle, stateClosed) {
		c.cancel(http.ErrServerClosed)
		_ = c.rwc.Close()
	}
}

// abort closes c whatever it is doing (Close).
func (c *conn) abort(cause error) {
	c.state.Store(stateClosed)
	c.cancel(cause)
	_ = c.rwc.Close()
}

func (c *conn) serve() {
	defer func() {
		if v := recover(); v != nil && v != http.ErrAbortHandler { //nolint:errorlint // the sentinel is panicked as is
			buf := make([]byte, 64<<10)
			buf = buf[:runtime.Stack(buf, false)]
			c.srv.logger().Warn("h1server: panic serving a request",
				slog.String("remote", c.remoteAddr), slog.Any("panic", v), slog.String("stack", string(buf)))
		}
		c.watch.stop(c)
		c.watch.release()
		c.cancel(ErrClientGone)
		_ = c.rwc.Close()
		c.state.Store(stateClosed)
		c.srv.trackConn(c, false)
	}()
	if tc, ok := c.rwc.(*tls.Conn); ok && !c.handshake(tc) {
		return
	}
	for first := true; ; first = false {
		w, err := c.readRequest(first)
		if err != nil {
			c.replyReadError(err)
			return
		}
		c.serveRequest(w)
		if !w.shouldReuse() {
			if w.body.rc != nil && !w.body.eof {
				c.linger()
			}
			return
		}
		c.state.Store(stateIdle)
		if c.srv.inShutdown.Load() {
			return
		}
	}
}

// handshake does the TLS handshake under ReadHeaderTimeout; a client that
// speaks plain HTTP is told so, as net/http does.
func (c *conn) handshake(tc *tls.Conn) bool {
	if d := c.srv.ReadHeaderTimeout; d > 0 {
		dl := time.Now().Add(d)
		_ = tc.SetReadDeadline(dl)
		_ = tc.SetWriteDeadline(dl)
	}
	if err := tc.HandshakeContext(c.ctx); err != nil {
		var re tls.RecordHeaderError
		if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
			_, _ = io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
			_ = re.Conn.Close()
			return false
		}
		c.srv.logger().Warn("h1server: TLS handshake failed", slog.String("remote", c.remoteAddr), slog.Any("error", err))
		return false
	}
	_ = tc.SetReadDeadline(time.Time{})
	_ = tc.SetWriteDeadline(time.Time{})
	st := tc.ConnectionState()
	c.tlsState = &st
	return true
}

func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO":
		return true
	}
	return false
}

// readRequest waits for the next request (under IdleTimeout, but for the
// first), then reads its line and headers under ReadHeaderTimeout and
// MaxHeaderBytes, and checks what net/http's server checks.
func (c *conn) readRequest(first bool) (*response, error) {
	if !first {
		if d := c.srv.IdleTimeout; d > 0 {
			_ = c.rwc.SetReadDeadline(time.Now().Add(d))
		} else {
			_ = c.rwc.SetReadDeadline(time.Time{}) // one the handler left
		}
		if _, err := c.br.Peek(1); err != nil {
			return nil, err
		}
	}
	if !c.state.CompareAndSwap(stateIdle, stateActive) {
		return nil, net.ErrClosed
	}
	if d := c.srv.ReadHeaderTimeout; d > 0 {
		_ = c.rwc.SetReadDeadline(time.Now().Add(d))
	} else if !first {
		_ = c.rwc.SetReadDeadline(time.Time{})
	}
	c.r.remain = c.srv.maxHeaderBytes() + 4096 // net/http's slack for bufio's read-ahead
	if c.lastPOST {
		// RFC 7230, section 3.5: old clients send CRLF after a POST's body.
		peek, _ := c.br.Peek(4)
		n := 0
		for n < len(peek) && (peek[n] == '\r' || peek[n] == '\n') {
			n++
		}
		_, _ = c.br.Discard(n)
	}
	req, err := http.ReadRequest(c.br)
	if err != nil {
		if c.r.hitLimit {
			return nil, &requestError{http.StatusRequestHeaderFieldsTooLarge, "the request line and headers are over the limit"}
		}
		return nil, err
	}
	c.r.remain = math.MaxInt64
	_ = c.rwc.SetReadDeadline(time.Time{})
	c.lastPOST = req.Method == http.MethodPost
	if err := checkRequest(req); err != nil {
		return nil, err
	}

	ctx, cancel := context.WithCancelCause(c.ctx)
	c.cancelReq = cancel
	req = req.WithContext(ctx)
	req.RemoteAddr = c.remoteAddr
	req.TLS = c.tlsState
	w := &response{
		c:                c,
		req:              req,
		header:           make(http.Header),
		contentLength:    -1,
		wantsClose:       hasToken(req.Header.Get("Connection"), "close"),
		wants10KeepAlive: req.ProtoMajor == 1 && req.ProtoMinor == 0 && hasToken(req.Header.Get("Connection"), "keep-alive"),
	}
	if req.Body != http.NoBody && req.Body != nil {
		w.body = reqBody{w: w, rc: req.Body}
		req.Body = &w.body
	}
	if expect := req.Header.Get("Expect"); expect != "" {
		if !hasToken(expect, "100-continue") {
			cancel(nil)
			return nil, &requestError{http.StatusExpectationFailed, "the Expect header's expectation is not supported"}
		}
		if req.ProtoAtLeast(1, 1) && req.ContentLength != 0 && w.body.rc != nil {
			w.body.expect, w.expectContinue, w.continueOK = true, true, true
		}
	}
	return w, nil
}

// checkRequest is net/http's server's checks of a parsed request. One is
// weaker: http.ReadRequest keeps only the first Host header (in req.Host,
// or the target's host in absolute form), so a request with two is served
// by the first where net/http refuses it, and an absolute-form target
// stands for a missing Host header. The gateway routes by path only.
func checkRequest(req *http.Request) error {
	if req.ProtoMajor != 1 {
		return &requestError{http.StatusHTTPVersionNotSupported, "unsupported protocol version"}
	}
	if req.ProtoAtLeast(1, 1) && req.Host == "" && req.Method != http.MethodConnect {
		return &requestError{http.StatusBadRequest, "missing required Host header"}
	}
	if !httpguts.ValidHostHeader(req.Host) {
		return &requestError{http.StatusBadRequest, "malformed Host header"}
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return &requestError{http.StatusBadRequest, "invalid header name"}
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return &requestError{http.StatusBadRequest, "invalid header value"}
			}
		}
	}
	return nil
}

// serveRequest runs the handler and finishes the response.
func (c *conn) serveRequest(w *response) {
	if w.body.rc == nil {
		c.watch.arm(c)
	}
	c.srv.Handler.ServeHTTP(w, w.req)
	w.finish()
	c.cancelReq(context.Canceled)
	c.watch.stop(c)
	if c.writeDeadline {
		c.writeDeadline = false
		_ = c.rwc.SetWriteDeadline(time.Time{})
	}
}

// replyReadError answers a request that could not be read, unless the
// client went away or timed out, and the connection is then closed.
func (c *conn) replyReadError(err error) {
	var re *requestError
	switch {
	case errors.As(err, &re):
	case isCommonNetReadError(err):
		return
	case strings.HasPrefix(err.Error(), "unsupported transfer encoding"):
		re = &requestError{http.StatusNotImplemented, err.Error()}
	default:
		re = &requestError{http.StatusBadRequest, "malformed request: " + err.Error()}
	}
	_ = c.rwc.SetWriteDeadline(time.Now().Add(lingerTimeout))
	_, _ = c.rwc.Write(errorReply(re.status, re.message))
	c.linger()
}

func isCommonNetReadError(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "read"
}

// linger half-closes the connection and reads what the client still
// sends, bounded in bytes and time, so that the close does not reset a
// response the client has not read yet.
func (c *conn) linger() {
	_ = c.bw.Flush()
	if cw, ok := c.rwc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.rwc.SetReadDeadline(time.Now().Add(lingerTimeout))
	_, _ = io.CopyN(io.Discard, c.rwc, maxPostHandlerReadBytes)
}

// hasToken reports whether the comma-separated list v holds token
// (case-insensitive), as net/http reads Connection and Expect.
func hasToken(v, token string) bool {
	for v != "" {
		var f string
		f, v, _ = strings.Cut(v, ",")
		if strings.EqualFold(strings.TrimSpace(f), token) {
			return true
		}
	}
	return false
}
