package main

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/tollgate-dev/tollgate/audit/forward"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/tlsconf"
)

// TestForwarderConnectionKeepalive: the forwarder's connection to the
// central plane (the options startForwarder dials with, and a dialer of
// the test's to reach the socket) runs gRPC keepalive with the parameters
// it is given (forward.Keepalive in startForwarder, which
// TestStartForwarderKeepalive checks); without it a dead link would hold
// an upload until the upload timeout, 15 minutes by default. gRPC sets
// the keepalive timeout on the connection's socket as TCP_USER_TIMEOUT
// when, and only when, keepalive is on, so the socket shows it. Watching
// keepalive find a peer that stopped answering would take at least gRPC's
// floor on a client's ping interval, 10 s, which no option lowers.
func TestForwarderConnectionKeepalive(t *testing.T) {
	// A timeout of the test's, not gRPC's default (20 s, forward.Keepalive's
	// too): the socket shows the parameters given, not any keepalive.
	ka := forward.Keepalive
	ka.Timeout = 1357 * time.Millisecond
	p := centraltest.StartPlane(t)
	cfg, sockets := forwarderToPlane(t, p, "app_keepalive")
	conn, err := grpc.NewClient(cfg.IngestAddr, forwarderDialOptions(cfg, ka)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if got := socketUserTimeout(t, conn, sockets); got != ka.Timeout {
		t.Fatalf("the forwarder's socket gives up on unacknowledged data after %s (TCP_USER_TIMEOUT), want the given timeout %s: "+
			"the connection does not run keepalive with the parameters given", got, ka.Timeout)
	}
}

// TestStartForwarderKeepalive: the connection startForwarder opens, the
// one its forwarder uploads on, is dialed with forward.Keepalive and runs
// keepalive (see TestForwarderConnectionKeepalive). Dialed without
// keepalive its socket would have no TCP_USER_TIMEOUT; with zero
// parameters it would have forward.Keepalive's (gRPC pings every 10 s at
// least and defaults the timeout to 20 s), so the parameters it was
// dialed with are compared too.
func TestStartForwarderKeepalive(t *testing.T) {
	p := centraltest.StartPlane(t)
	cfg, sockets := forwarderToPlane(t, p, "app_startkeepalive")
	audit, err := auditlog.Open(t.TempDir(), auditlog.Options{ApplianceID: "app_startkeepalive"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = audit.Close() })
	cfg.Data, cfg.Audit, cfg.HeadInterval, cfg.Logger = t.TempDir(), audit, time.Minute, slog.New(slog.DiscardHandler)
	r, err := startForwarder(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop) // before the audit log's close, registered above
	if r.keepalive != forward.Keepalive {
		t.Fatalf("startForwarder dialed with keepalive %+v, want forward.Keepalive %+v", r.keepalive, forward.Keepalive)
	}
	if got := socketUserTimeout(t, r.conn, sockets); got != forward.Keepalive.Timeout {
		t.Fatalf("the started forwarder's socket gives up on unacknowledged data after %s (TCP_USER_TIMEOUT), want forward.Keepalive's %s: "+
			"its connection does not run keepalive", got, forward.Keepalive.Timeout)
	}
}

// forwarderToPlane is the configuration of a forwarder publishing to p as
// applianceID, whose Dialer sends the first socket it opens on sockets.
func forwarderToPlane(t *testing.T, p *centraltest.Plane, applianceID string) (forwarderConfig, <-chan net.Conn) {
	t.Helper()
	roots, err := tlsconf.Pool(p.ServerCertPEM)
	if err != nil {
		t.Fatal(err)
	}
	sockets := make(chan net.Conn, 1)
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := new(net.Dialer).DialContext(ctx, "tcp", addr)
		if err == nil {
			select {
			case sockets <- c:
			default: // a redial; the first socket is the one looked at
			}
		}
		return c, err
	}
	return forwarderConfig{IngestAddr: p.Addrs.Ingest, ServerName: "127.0.0.1", Roots: roots, App: p.Fleet.Appliance(t, applianceID), Dialer: dial}, sockets
}

// socketUserTimeout connects conn and returns the TCP_USER_TIMEOUT of the
// first socket it opened, which its dialer sent on sockets.
func socketUserTimeout(t *testing.T, conn *grpc.ClientConn, sockets <-chan net.Conn) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard, not a timing
	defer cancel()
	conn.Connect()
	for s := conn.GetState(); s != connectivity.Ready; s = conn.GetState() {
		if !conn.WaitForStateChange(ctx, s) {
			t.Fatalf("the forwarder's connection is %s after a minute, not ready", s)
		}
	}
	var socket net.Conn
	select {
	case socket = <-sockets:
	default:
		t.Fatal("the connection is ready on no socket of the test's dialer")
	}
	raw, err := socket.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ms int
	var optErr error
	if err := raw.Control(func(fd uintptr) { ms, optErr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT) }); err != nil {
		t.Fatal(err)
	}
	if optErr != nil {
		t.Fatal(optErr)
	}
	return time.Duration(ms) * time.Millisecond
}
