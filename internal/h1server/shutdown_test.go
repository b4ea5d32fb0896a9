package h1server

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"testing"
)

// blocking is a handler that signals its start and waits for release or
// its context; it reports its context's cause.
type blocking struct {
	started chan struct{}
	release chan struct{}
	cause   chan error
}

func newBlocking() *blocking {
	return &blocking{started: make(chan struct{}, 1), release: make(chan struct{}), cause: make(chan error, 1)}
}

func (b *blocking) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/block" {
		return
	}
	b.started <- struct{}{}
	select {
	case <-b.release:
		_, _ = w.Write([]byte("released"))
	case <-r.Context().Done():
		b.cause <- context.Cause(r.Context())
	}
}

func TestShutdown(t *testing.T) {
	t.Run("idle connections close at once", func(t *testing.T) {
		srv, addr, _ := start(t, echo)
		c := dial(t, addr)
		c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		c.read("GET")
		idle := dial(t, addr) // never sends
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if !c.closed() || !idle.closed() {
			t.Fatal("an idle connection stays open")
		}
	})
	t.Run("an active request finishes, then its connection closes", func(t *testing.T) {
		b := newBlocking()
		srv, addr, _ := start(t, b)
		c := dial(t, addr)
		c.send("GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
		<-b.started
		done := make(chan error, 1)
		go func() { done <- srv.Shutdown(context.Background()) }()
		for !srv.inShutdown.Load() {
			runtime.Gosched()
		}
		select {
		case err := <-done:
			t.Fatalf("Shutdown returned with a request running: %v", err)
		default:
		}
		close(b.release)
		if r := c.read("GET"); r.body != "released" || !r.Close {
			t.Fatalf("%q close=%v", r.body, r.Close)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if !c.closed() {
			t.Fatal("the connection stays open")
		}
	})
	t.Run("its context ending returns its error", func(t *testing.T) {
		b := newBlocking()
		srv, addr, _ := start(t, b)
		c := dial(t, addr)
		c.send("GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
		<-b.started
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := srv.Shutdown(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Shutdown: %v", err)
		}
		close(b.release)
	})
	t.Run("Close cancels a running handler's context", func(t *testing.T) {
		b := newBlocking()
		srv, addr, _ := start(t, b)
		c := dial(t, addr)
		c.send("GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
		<-b.started
		if err := srv.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-b.cause; !errors.Is(err, http.ErrServerClosed) {
			t.Fatalf("cause %v", err)
		}
		if !c.closed() {
			t.Fatal("the connection stays open")
		}
	})
	t.Run("Serve after Shutdown", func(t *testing.T) {
		srv := &Server{Handler: echo}
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := srv.Serve(nil); !errors.Is(err, http.ErrServerClosed) {
			t.Fatalf("Serve: %v", err)
		}
	})
}
