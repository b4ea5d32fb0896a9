// Package h1server serves an http.Handler over HTTP/1.1 for the gateway
// listener, as net/http's server does but without its per-request
// background read: net/http starts a goroutine reading the connection for
// every request, to notice a client that goes away, and wakes and stops it
// after the response. Here that watch is armed only for a request still
// running after watchDelay (watch.go), so a request served within it costs
// no goroutine and no wake-up. Parsing is the standard library's
// (http.ReadRequest); framing, keep-alive and the errors a client can see
// follow net/http's server (docs/gateway-api.md).
package h1server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Server serves Handler over HTTP/1.1 on the listeners given to Serve.
// Its fields are read when Serve starts and must not change after.
type Server struct {
	Handler http.Handler
	// BaseContext returns the context each connection's requests derive
	// from; canceling it (with a cause) cancels them (context.Cause sees
	// the cause). Nil: context.Background.
	BaseContext func(net.Listener) context.Context
	// ReadHeaderTimeout bounds the TLS handshake and the reading of each
	// request's line and headers (from its first byte). Zero: no bound.
	ReadHeaderTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a kept
	// connection. Zero: no bound.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's line and headers; over it the
	// answer is 431 and the connection closes. Zero:
	// http.DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// Logger receives the server's own errors (a handler's panic, a TLS
	// handshake that failed). Nil: slog.Default.
	Logger *slog.Logger

	inShutdown atomic.Bool
	mu         sync.Mutex
	listeners  map[*net.Listener]struct{}
	conns      map[*conn]struct{}
	changed    chan struct{} // closed and replaced when a connection ends during shutdown

	watches    atomic.Int64  // disconnect watches started, for tests
	watchDelay time.Duration // zero: the constant; tests may set it
}

// Serve accepts connections on l and serves each on its own goroutine. It
// returns http.ErrServerClosed once Shutdown or Close has been called.
func (s *Server) Serve(l net.Listener) error {
	if !s.trackListener(&l, true) {
		return http.ErrServerClosed
	}
	defer s.trackListener(&l, false)
	base := context.Background()
	if s.BaseContext != nil {
		if base = s.BaseContext(l); base == nil {
			panic("h1server: BaseContext returned a nil context")
		}
	}
	var backoff time.Duration
	for {
		rwc, err := l.Accept()
		if err != nil {
			if s.inShutdown.Load() {
				return http.ErrServerClosed
			}
			// Temporary is what net/http retries on too (EMFILE, ECONNABORTED).
			var ne net.Error
			if errors.As(err, &ne) && ne.Temporary() { //nolint:staticcheck // as net/http's Serve
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.logger().Warn("h1server: accept failed; retrying", slog.Any("error", err), slog.Duration("delay", backoff))
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		c := newConn(s, rwc, base)
		if !s.trackConn(c, true) {
			_ = rwc.Close()
			return http.ErrServerClosed
		}
		go c.serve()
	}
}

// Shutdown stops accepting, closes the idle connections at once, and waits
// for each active one to finish its request, then closes it. It returns
// ctx's error if ctx ends first (the connections still active are left
// to Close), as net/http's Shutdown does.
func (s *Server) Shutdown(ctx context.Context) error {
	s.inShutdown.Store(true)
	s.mu.Lock()
	err := s.closeListenersLocked()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	s.mu.Unlock()
	for {
		s.mu.Lock()
		for c := range s.conns {
			c.closeIfIdle()
		}
		if len(s.conns) == 0 {
			s.mu.Unlock()
			return err
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// Close closes the listeners and every connection now, canceling the
// contexts of the requests running (cause: http.ErrServerClosed). It does
// not wait for their handlers.
func (s *Server) Close() error {
	s.inShutdown.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.closeListenersLocked()
	for c := range s.conns {
		c.abort(http.ErrServerClosed)
	}
	return err
}

func (s *Server) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

func (s *Server) maxHeaderBytes() int64 {
	if s.MaxHeaderBytes > 0 {
		return int64(s.MaxHeaderBytes)
	}
	return http.DefaultMaxHeaderBytes
}

// trackListener adds or removes l; adding fails once the server is
// shutting down.
func (s *Server) trackListener(l *net.Listener, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		delete(s.listeners, l)
		return true
	}
	if s.inShutdown.Load() {
		return false
	}
	if s.listeners == nil {
		s.listeners = make(map[*net.Listener]struct{})
	}
	s.listeners[l] = struct{}{}
	return true
}

// trackConn adds or removes c; adding fails once the server is shutting
// down. A removal during shutdown wakes Shutdown.
func (s *Server) trackConn(c *conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		delete(s.conns, c)
		if s.changed != nil {
			close(s.changed)
			s.changed = make(chan struct{})
		}
		return true
	}
	if s.inShutdown.Load() {
		return false
	}
	if s.conns == nil {
		s.conns = make(map[*conn]struct{})
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) closeListenersLocked() error {
	var errs []error
	for l := range s.listeners {
		if err := (*l).Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
