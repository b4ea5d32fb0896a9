// Package lifecycle runs the servers and loops of one process (the
// appliance, the central plane) the same way: every address is bound
// before anything serves, so that a busy port fails the start instead of
// ending a process already reported up; then servers and loops run under
// one errgroup until the context ends or one of them fails; then the
// process stops in the order its owner gives (Group.Wait returns once
// everything has returned).
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
)

// Listeners binds a process's addresses. Until Serving is called, Close
// closes every listener bound, so a start that fails half-way leaves no
// port held; from then on the servers own them.
type Listeners struct {
	what    string // the process, for errors
	ls      []net.Listener
	serving bool
}

// NewListeners returns an empty set for the process named what.
func NewListeners(what string) *Listeners { return &Listeners{what: what} }

// Listen binds addr (TCP) for the listener named name.
func (l *Listeners) Listen(ctx context.Context, name, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %s listener %s: %w", l.what, name, addr, err)
	}
	l.ls = append(l.ls, lis)
	return lis, nil
}

// Serving hands the listeners to their servers: Close no longer closes
// them.
func (l *Listeners) Serving() { l.serving = true }

// Close closes every listener unless Serving was called; defer it right
// after NewListeners.
func (l *Listeners) Close() {
	if l.serving {
		return
	}
	for _, lis := range l.ls {
		_ = lis.Close()
	}
}

// Group runs a process's parts. Its context ends when the parent's does or
// when a part fails.
type Group struct {
	what string
	g    *errgroup.Group
	ctx  context.Context
}

// NewGroup returns a group of the process named what, and its context.
func NewGroup(ctx context.Context, what string) (*Group, context.Context) {
	g, gctx := errgroup.WithContext(ctx)
	return &Group{what: what, g: g, ctx: gctx}, gctx
}

// Go runs f as a part; an error from it ends the group.
func (g *Group) Go(f func() error) { g.g.Go(f) }

// HTTPServer is an HTTP server as Group.HTTP runs it: *http.Server, or
// the gateway's h1server.Server. Serve returns http.ErrServerClosed once
// the server is shut down or closed.
type HTTPServer interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
}

// HTTP serves srv on lis; its closing (Shutdown, Close) is not an error.
func (g *Group) HTTP(name string, srv HTTPServer, lis net.Listener) {
	g.g.Go(func() error {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("%s: %s server: %w", g.what, name, err)
		}
		return nil
	})
}

// GRPC serves srv on lis; its stopping is not an error.
func (g *Group) GRPC(name string, srv *grpc.Server, lis net.Listener) {
	g.g.Go(func() error {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("%s: %s server: %w", g.what, name, err)
		}
		return nil
	})
}

// OnStop runs stop once the group's context ends (the parent's ended, or a
// part failed), as a part of the group: Wait returns after it.
func (g *Group) OnStop(stop func()) {
	g.g.Go(func() error {
		<-g.ctx.Done()
		stop()
		return nil
	})
}

// Wait waits for every part and returns the first failure; a group ended
// by its parent's cancellation returns nil.
func (g *Group) Wait() error {
	err := g.g.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
