package main

import (
	"context"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/forward"
	"github.com/tollgate-dev/tollgate/central/tlsconf"
)

// TestForwarderConnectionKeepalive: the forwarder's connection to the
// central plane (the options startForwarder dials with, and a dialer of
// the test's to reach the socket) runs gRPC keepalive with the parameters
// it is given (forward.Keepalive in startForwarder); without it a dead
// link would hold an upload until the upload timeout, 15 minutes by
// default. gRPC sets the keepalive
// timeout on the connection's socket as TCP_USER_TIMEOUT when, and only
// when, keepalive is on, so the socket shows it. Watching keepalive find
// a peer that stopped answering would take at least gRPC's floor on a
// client's ping interval, 10 s, which no option lowers.
func TestForwarderConnectionKeepalive(t *testing.T) {
	// A timeout of the test's, not gRPC's default (20 s, forward.Keepalive's
	// too): the socket shows the parameters given, not any keepalive.
	ka := forward.Keepalive
	ka.Timeout = 1357 * time.Millisecond
	p := centraltest.StartPlane(t)
	roots, err := tlsconf.Pool(p.ServerCertPEM)
	if err != nil {
		t.Fatal(err)
	}
	cfg := forwarderConfig{IngestAddr: p.Addrs.Ingest, ServerName: "127.0.0.1", Roots: roots, App: p.Fleet.Appliance(t, "app_keepalive")}
	sockets := make(chan net.Conn, 8)
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
	conn, err := grpc.NewClient(cfg.IngestAddr, append(forwarderDialOptions(cfg, ka), grpc.WithContextDialer(dial))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard, not a timing
	defer cancel()
	conn.Connect()
	for s := conn.GetState(); s != connectivity.Ready; s = conn.GetState() {
		if !conn.WaitForStateChange(ctx, s) {
			t.Fatalf("the forwarder's connection is %s after a minute, not ready", s)
		}
	}
	raw, err := (<-sockets).(*net.TCPConn).SyscallConn()
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
	if got := time.Duration(ms) * time.Millisecond; got != ka.Timeout {
		t.Fatalf("the forwarder's socket gives up on unacknowledged data after %s (TCP_USER_TIMEOUT), want the given timeout %s: "+
			"the connection does not run keepalive with the parameters given", got, ka.Timeout)
	}
}
