package lifecycle

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
)

// A start that fails half-way leaves no port held; one that served hands
// its listeners to the servers.
func TestListenersCloseUnlessServing(t *testing.T) {
	ls := NewListeners("test")
	a, err := ls.Listen(context.Background(), "a", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ls.Listen(context.Background(), "b", a.Addr().String()); err == nil {
		t.Fatal("a second listener on a bound address was made")
	}
	ls.Close()
	if _, err := net.Listen("tcp", a.Addr().String()); err != nil {
		t.Fatalf("address still held after Close: %v", err)
	}

	ls = NewListeners("test")
	b, err := ls.Listen(context.Background(), "b", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ls.Serving()
	ls.Close()
	defer b.Close()
	if _, err := net.Listen("tcp", b.Addr().String()); err == nil {
		t.Fatal("Close closed a listener handed to its server")
	}
}

// A part that fails ends the group: the stop runs, the servers close, and
// Wait returns the failure; a parent's cancellation is no failure.
func TestGroupStopsOnFailureAndCancellation(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail error
	}{{"failure", errors.New("part failed")}, {"cancelled", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			g, _ := NewGroup(ctx, "test")
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := &http.Server{Handler: http.NotFoundHandler()}
			g.HTTP("web", srv, lis)
			stopped := false
			g.OnStop(func() { stopped = true; _ = srv.Close() })
			if tc.fail != nil {
				g.Go(func() error { return tc.fail })
			} else {
				cancel()
			}
			if err := g.Wait(); !errors.Is(err, tc.fail) {
				t.Fatalf("Wait = %v, want %v", err, tc.fail)
			}
			if !stopped {
				t.Fatal("the stop did not run")
			}
		})
	}
}
