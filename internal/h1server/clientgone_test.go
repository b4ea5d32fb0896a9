package h1server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestClientGoneCancelsContext: a handler still running after the watch's
// delay sees its context canceled, cause ErrClientGone, when the client
// closes; with a body too, once it has been read.
func TestClientGoneCancelsContext(t *testing.T) {
	for _, send := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
	} {
		t.Run(strings.Fields(send)[0], func(t *testing.T) {
			cause := make(chan error, 1)
			started := make(chan struct{})
			srv, addr, _ := start(t, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				buf := make([]byte, 8)
				for {
					if _, err := r.Body.Read(buf); err != nil {
						break
					}
				}
				close(started)
				<-r.Context().Done()
				cause <- context.Cause(r.Context())
			}))
			c := dial(t, addr)
			c.send(send)
			wait(t, started, "the handler's start")
			_ = c.c.Close()
			select {
			case err := <-cause:
				if !errors.Is(err, ErrClientGone) {
					t.Fatalf("cause %v, want ErrClientGone", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the context was not canceled")
			}
			if n := srv.watches.Load(); n != 1 {
				t.Fatalf("%d watches started, want 1", n)
			}
		})
	}
}

// TestWatchKeepsPipelinedByte: the byte the watch reads belongs to the
// next request, which is served whole.
func TestWatchKeepsPipelinedByte(t *testing.T) {
	watched := make(chan struct{})
	srv, addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-watched
		}
		_, _ = w.Write([]byte(r.URL.Path))
	}), func(s *Server) { s.watchDelay = time.Millisecond })
	c := dial(t, addr)
	c.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	for srv.watches.Load() == 0 {
		runtime.Gosched()
	}
	c.send("GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
	close(watched)
	if r := c.read("GET"); r.body != "/slow" {
		t.Fatalf("first: %q", r.body)
	}
	if r := c.read("GET"); r.body != "/next" {
		t.Fatalf("second: %q", r.body)
	}
}

// TestFastRequestsStartNoGoroutine: a request that ends within the watch's
// delay starts no watch; the delay here is longer than any of them.
func TestFastRequestsStartNoGoroutine(t *testing.T) {
	srv, addr, _ := start(t, echo, func(s *Server) { s.watchDelay = time.Hour })
	c := dial(t, addr)
	c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	c.read("GET") // the connection's goroutine runs
	before := runtime.NumGoroutine()
	for range 500 {
		c.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
		if r := c.read("POST"); r.body != "POST / hi" {
			t.Fatalf("body %q", r.body)
		}
	}
	if n := srv.watches.Load(); n != 0 {
		t.Fatalf("%d watches started", n)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("goroutines %d → %d", before, after)
	}
}

// TestWriteToStalledClient: a write to a client that stopped reading,
// under a write deadline, fails and cancels the request's context.
func TestWriteToStalledClient(t *testing.T) {
	result := make(chan error, 2)
	_, addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		chunk := make([]byte, 64<<10)
		var err error
		for i := 0; i < 1<<14 && err == nil; i++ { // at most 1 GiB
			if err = rc.SetWriteDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
				break
			}
			if _, err = w.Write(chunk); err == nil {
				err = rc.Flush()
			}
		}
		result <- err
		result <- context.Cause(r.Context())
	}))
	c := dial(t, addr)
	c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if err := <-result; err == nil {
		t.Fatal("the writes never failed")
	}
	if cause := <-result; !errors.Is(cause, ErrClientGone) {
		t.Fatalf("context cause %v, want ErrClientGone", cause)
	}
}

// TestBaseContextCause: canceling the base context with a cause cancels
// the requests with it (the edge tells shutdown from a client gone so).
func TestBaseContextCause(t *testing.T) {
	errStop := errors.New("stopping")
	base, cancel := context.WithCancelCause(context.Background())
	started := make(chan struct{})
	cause := make(chan error, 1)
	_, addr, _ := start(t, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
		cause <- context.Cause(r.Context())
	}), func(s *Server) { s.BaseContext = func(net.Listener) context.Context { return base } })
	c := dial(t, addr)
	c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	wait(t, started, "the handler's start")
	cancel(errStop)
	if err := <-cause; !errors.Is(err, errStop) {
		t.Fatalf("cause %v", err)
	}
}

// TestWatchStoppedBeforeNextRequest: a watch running when its handler
// returns is stopped (a read deadline in the past), the context is not
// taken for a client gone, and the next request is served.
func TestWatchStoppedBeforeNextRequest(t *testing.T) {
	causes := make(chan error, 2)
	srv, addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			for srv := r.Context().Value(serverKey{}).(*Server); srv.watches.Load() == 0; {
				runtime.Gosched()
			}
		}
		_, _ = w.Write([]byte(r.URL.Path))
		causes <- r.Context().Err()
	}), func(s *Server) {
		s.watchDelay = time.Millisecond
		s.BaseContext = func(net.Listener) context.Context { return context.WithValue(context.Background(), serverKey{}, s) }
	})
	c := dial(t, addr)
	c.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	if r := c.read("GET"); r.body != "/slow" {
		t.Fatalf("first: %q", r.body)
	}
	c.send("GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
	if r := c.read("GET"); r.body != "/next" {
		t.Fatalf("second: %q", r.body)
	}
	for range 2 {
		if err := <-causes; err != nil {
			t.Fatalf("a handler's context ended while it ran: %v", err)
		}
	}
	if n := srv.watches.Load(); n < 1 {
		t.Fatalf("%d watches", n)
	}
}

type serverKey struct{}
