package vllm

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Transport is the engines' HTTP/1.1 client transport. It does a round
// trip on the calling goroutine: the request is written and the response
// header read by the caller, and the body is read by whoever reads it,
// over a bounded pool of kept-alive connections per server. net/http's
// Transport instead hands each request to a write goroutine and takes the
// response from a read goroutine of its connection, two wake-ups of
// another thread per request, which a virtual machine makes costly: on
// the development VM, at light load, this transport saves 120-190 µs of
// CPU per call (BenchmarkTransport, paced; docs/engines.md,
// "Connections").
//
// It writes the bytes of (*http.Request).Write (the engines' POSTs by
// its own writer, writeRequest), parses with the standard library
// (http.ReadResponse), speaks HTTP/1.1 only (a model server's API is
// HTTP/1.1) and takes no proxy. The zero value is ready, with the
// defaults below.
//
// Retries follow net/http's rule: a request that failed on a reused
// connection is sent once more, on a new one, when none of it reached the
// connection (the write failed before its first byte), or, for a request
// net/http deems replayable (GET, HEAD, OPTIONS, TRACE, or one with an
// Idempotency-Key header, with a body it can send again), when the
// connection ended before the first byte of a response. A chat
// completion, a POST, is therefore never sent twice once any of it was
// written: the server may have started generating it. Connections the
// server closed while idle are found before use (a non-blocking peek at
// the socket), so that this case is rare.
//
// A server may answer before it has read a request's whole body (a 413,
// or a 400 on the header alone) and close the connection, which fails the
// body's write. As net/http, which reads the response while it writes,
// the transport then returns that answer, when a complete one (its body
// at most 64 KiB) is on the connection within 50 ms of the failure; the
// connection is closed. Else the write's error is returned.
type Transport struct {
	// TLSClientConfig is used for https:// servers (nil: the system's
	// roots, TLS 1.2 or later).
	TLSClientConfig *tls.Config
	// MaxConnsPerServer bounds the connections open to one server (0:
	// DefaultMaxConnsPerServer). A request that finds all of them busy
	// waits for one until its context ends.
	MaxConnsPerServer int
	// MaxIdlePerServer bounds the idle connections kept (0:
	// DefaultMaxIdlePerServer); one more returned is closed.
	MaxIdlePerServer int
	// IdleTimeout is how long an idle connection is kept (0:
	// DefaultIdleTimeout).
	IdleTimeout time.Duration
	// DialContext opens connections (nil: a net.Dialer with a 5 s
	// timeout and 30 s TCP keep-alives).
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)

	mu    sync.Mutex
	pools map[poolKey]*connPool
}

// The transport's defaults. vLLM runs up to 256 sequences at once by
// default (max_num_seqs), and queues more: 512 connections is room for a
// server's batch and its queue, while bounding the gateway's descriptors
// and buffers (~8 KiB a connection) per server.
const (
	DefaultMaxConnsPerServer = 512
	DefaultMaxIdlePerServer  = 256
	DefaultIdleTimeout       = 90 * time.Second
	dialTimeout              = 5 * time.Second
)

var _ http.RoundTripper = (*Transport)(nil)

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	p, err := t.pool(req)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	ctx := req.Context()
	for retried := false; ; retried = true {
		pc, err := p.get(ctx, retried)
		if err != nil {
			closeBody(req)
			return nil, err
		}
		resp, err := pc.roundTrip(ctx, req)
		if err == nil {
			return resp, nil
		}
		if retried || !pc.reused || ctx.Err() != nil || !retryable(req, err) {
			closeBody(req)
			return nil, err
		}
		// Once more, on a new connection (get's fresh): the pool's idle
		// ones may all be as stale as this one was.
		if req, err = rewound(req); err != nil {
			return nil, err
		}
	}
}

// CloseIdleConnections closes the connections no request is using (what
// http.Client.CloseIdleConnections calls).
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	pools := make([]*connPool, 0, len(t.pools))
	for _, p := range t.pools {
		pools = append(pools, p)
	}
	t.mu.Unlock()
	for _, p := range pools {
		p.closeIdle()
	}
}

// poolKey names a server's pool: its URL's scheme and host (with the
// port when the URL has one). A struct, so that finding the pool of a
// request makes no string.
type poolKey struct{ scheme, host string }

// pool returns the pool of req's server, made at its first request.
func (t *Transport) pool(req *http.Request) (*connPool, error) {
	u := req.URL
	if u == nil || u.Host == "" {
		return nil, errors.New("vllm transport: a request without a host")
	}
	var tlsConf *tls.Config
	port := "80"
	switch u.Scheme {
	case "http":
	case "https":
		port = "443"
	default:
		return nil, fmt.Errorf("vllm transport: scheme %q is neither http nor https", u.Scheme)
	}
	key := poolKey{u.Scheme, u.Host}
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.pools[key]; p != nil {
		return p, nil
	}
	host := u.Hostname()
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(host, port)
	}
	if u.Scheme == "https" {
		if t.TLSClientConfig != nil {
			tlsConf = t.TLSClientConfig.Clone()
		} else {
			tlsConf = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		if tlsConf.ServerName == "" {
			tlsConf.ServerName = strings.TrimSuffix(host, ".")
		}
		tlsConf.NextProtos = nil // HTTP/1.1 only: no ALPN offer of h2
	}
	dial := t.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	p := &connPool{
		addr: addr, tls: tlsConf, dial: dial,
		maxOpen: orDefault(t.MaxConnsPerServer, DefaultMaxConnsPerServer),
		maxIdle: orDefault(t.MaxIdlePerServer, DefaultMaxIdlePerServer),
		idleFor: orDefault(t.IdleTimeout, DefaultIdleTimeout),
	}
	if t.pools == nil {
		t.pools = map[poolKey]*connPool{}
	}
	t.pools[key] = p
	return p, nil
}

func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// retryable says whether req, which failed with err on a reused
// connection, may be sent again (Transport's doc: net/http's rule).
func retryable(req *http.Request, err error) bool {
	var rt *roundTripError
	if !errors.As(err, &rt) {
		return false
	}
	canResend := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	if rt.nothingWritten {
		return canResend
	}
	return rt.noResponse && canResend && replayable(req)
}

// replayable is net/http's notion of a request safe to send twice.
func replayable(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, a := req.Header["Idempotency-Key"]
	_, b := req.Header["X-Idempotency-Key"]
	return a || b
}

// rewound is req with its body to send again.
func rewound(req *http.Request) (*http.Request, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, fmt.Errorf("vllm transport: rewinding the request's body: %w", err)
	}
	r := *req
	r.Body = body
	return &r, nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// roundTripError is a round trip's failure, with what a retry needs to
// know of it.
type roundTripError struct {
	err error
	// nothingWritten: no byte of the request reached the connection.
	nothingWritten bool
	// noResponse: no byte of a response was read.
	noResponse bool
}

func (e *roundTripError) Error() string { return e.err.Error() }
func (e *roundTripError) Unwrap() error { return e.err }
