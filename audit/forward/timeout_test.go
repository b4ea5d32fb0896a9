package forward_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/audit/forward"
	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central"
	"github.com/tollgate-dev/tollgate/central/tlsconf"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
	"github.com/tollgate-dev/tollgate/internal/lockedbuf"
)

// blackhole is a TCP proxy to the central plane's ingest that can go
// silent: every byte then sent either way is dropped, and no connection
// is closed, as when the plane loses power or a link drops every packet.
// Restored, it closes the connections it held (the plane, back, knows
// none of them) and forwards new ones again.
type blackhole struct {
	lis    net.Listener
	target string
	mu     sync.Mutex
	silent bool
	conns  []net.Conn
}

func newBlackhole(t *testing.T, target string) *blackhole {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{lis: lis, target: target}
	t.Cleanup(func() {
		_ = lis.Close()
		b.closeAll()
	})
	go b.serve()
	return b
}

func (b *blackhole) serve() {
	for {
		c, err := b.lis.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", b.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		b.mu.Lock()
		b.conns = append(b.conns, c, s)
		b.mu.Unlock()
		go b.pipe(s, c)
		go b.pipe(c, s)
	}
}

func (b *blackhole) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			_ = dst.Close()
			return
		}
		b.mu.Lock()
		silent := b.silent
		b.mu.Unlock()
		if !silent {
			if _, err := dst.Write(buf[:n]); err != nil {
				_ = src.Close()
				return
			}
		}
	}
}

func (b *blackhole) silence() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.silent = true
}

// restore forwards again, closing the connections held while silent.
func (b *blackhole) restore() {
	b.mu.Lock()
	b.silent = false
	b.mu.Unlock()
	b.closeAll()
}

func (b *blackhole) closeAll() {
	b.mu.Lock()
	conns := b.conns
	b.conns = nil
	b.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// TestSilentConnection: an upload on a connection that goes silent mid-way
// (no byte arrives either way, none is refused) ends at the upload
// timeout with DeadlineExceeded and the head stays queued; once the
// plane can be reached again, Run retries it with backoff and delivers
// it. Without the timeout, Flush waited on the dead connection until the
// operating system gave up on it, some two hours, and no head of any
// tenant was forwarded meanwhile.
func TestSilentConnection(t *testing.T) {
	// Both sides log at debug level; a failure prints them, the refusal's
	// code and message and what the plane made of each upload.
	planeLogs, fwdLogs := &lockedbuf.Buffer{}, &lockedbuf.Buffer{}
	debug := &slog.HandlerOptions{Level: slog.LevelDebug}
	e := setup(t, func(c *central.Config) { c.Logger = slog.New(slog.NewTextHandler(planeLogs, debug)) })
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("forwarder log:\n%s", fwdLogs.String())
			t.Logf("central plane log:\n%s", planeLogs.String())
		}
	})
	hole := newBlackhole(t, e.plane.Addrs.Ingest)
	roots, err := tlsconf.Pool(e.plane.ServerCertPEM)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(hole.lis.Addr().String(),
		grpc.WithTransportCredentials(credentials.NewTLS(tlsconf.Appliance(e.plane.Fleet.Appliance(t, "app_fwd"), roots, "127.0.0.1"))),
		grpc.WithKeepaliveParams(forward.Keepalive))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	e.client.CentralAuditServiceClient = centralv1.NewCentralAuditServiceClient(conn)

	// A first head goes through: the connection is up.
	e.record(t, "acme", 2)
	e.sign(t)
	e.collect(t, 1)
	if err := e.fwd.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.checkCentral(t, "acme")

	const timeout = 300 * time.Millisecond
	stored := make(chan head.Head, 1)
	e.tweak = func(o *forward.Options) {
		o.UploadTimeout = timeout
		o.After = func(time.Duration) <-chan time.Time { // every wait ends at once
			now := make(chan time.Time, 1)
			now <- time.Time{}
			return now
		}
		o.OnStored = func(h head.Head) { stored <- h }
		o.Logger = slog.New(slog.NewTextHandler(fwdLogs, debug))
	}
	_ = e.fwd.Close()
	e.open(t)

	hole.silence()
	e.clock.Advance(2 * time.Second)
	e.record(t, "acme", 3)
	signed := e.sign(t)
	e.collect(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard, not a timing
	defer cancel()
	err = e.fwd.Flush(ctx)
	if ctx.Err() != nil {
		t.Fatalf("Flush on a silent connection did not return within the hang guard: %v", err)
	}
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "upload timeout") {
		t.Fatalf("Flush on a silent connection: %v, want DeadlineExceeded at the upload timeout", err)
	}
	if b := e.fwd.Backlog(); b.Heads != 1 || b.Leaves != 3 || b.Refused != 0 {
		t.Fatalf("backlog after the timeout %+v, want the head and its 3 leaves queued", b)
	}

	// The plane is back: Run retries and delivers the head.
	hole.restore()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.fwd.Run(runCtx) }()
	select {
	case h := <-stored:
		if h != signed[0] {
			t.Fatalf("stored %+v, signed %+v", h, signed[0])
		}
	case <-ctx.Done():
		t.Fatalf("the head was not delivered once the plane was back; backlog %+v", e.fwd.Backlog())
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if b := e.fwd.Backlog(); b.Heads != 0 {
		t.Fatalf("backlog after delivery %+v", b)
	}
	e.checkCentral(t, "acme")
}
