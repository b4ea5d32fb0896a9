package central_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/central"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
	"github.com/tollgate-dev/tollgate/internal/lockedbuf"
)

// awaitConnClosed waits for the plane to close c, a connection on which
// the test sends nothing: a read ends without data.
func awaitConnClosed(t *testing.T, c net.Conn) {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(hangGuard)); err != nil {
		t.Fatal(err)
	}
	n, err := c.Read(make([]byte, 1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the plane left the connection open for %s", hangGuard)
	}
	if n != 0 || err == nil {
		t.Fatalf("read %d bytes, %v; want the connection closed", n, err)
	}
}

// awaitRefused connects to the ingest listener and waits for the plane to
// close the connection: the connect itself is reset, or a read ends
// without data.
func awaitRefused(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if errors.Is(err, syscall.ECONNRESET) {
		return // reset before the connect returned
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	awaitConnClosed(t, c)
}

// awaitReleased waits for a closed ingest connection's slot to be free.
func awaitReleased(t *testing.T, released <-chan struct{}) {
	t.Helper()
	select {
	case <-released:
	case <-time.After(hangGuard):
		t.Fatalf("no ingest connection slot freed within %s", hangGuard)
	}
}

func dialIngest(t *testing.T, p *centraltest.Plane) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addrs.Ingest)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestIngestBoundsConnections: with IngestMaxConns connections open, one
// more is closed as soon as it is accepted, before its handshake, whoever
// opens it (an appliance's call fails as Unavailable, which the forwarder
// retries), and the refusal is logged; once the open connection closes,
// its slot is free and the other appliance's upload is stored. Before,
// nothing bounded the ingest listener's connections.
func TestIngestBoundsConnections(t *testing.T) {
	var logs lockedbuf.Buffer
	released := make(chan struct{}, 8)
	p := centraltest.StartPlaneWith(t, func(c *central.Config) {
		c.IngestMaxConns = 1
		c.IngestHandshakeTimeout = time.Hour // only the bound closes a connection here
		c.OnIngestConnClosed = func() { released <- struct{}{} }
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	one := p.Fleet.Appliance(t, "app_one")
	conn := p.IngestConn(t, one)
	if _, err := centraltest.Publish(context.Background(), centralv1.NewCentralAuditServiceClient(conn), treeUpload(t, "acme", one, 3)); err != nil {
		t.Fatal(err)
	}

	awaitRefused(t, p.Addrs.Ingest)
	two := p.Fleet.Appliance(t, "app_two")
	_, err := centraltest.Publish(context.Background(), p.IngestClient(t, two), treeUpload(t, "acme", two, 3))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("an upload on a connection beyond the bound: %v, want Unavailable", err)
	}
	const warned = `level=WARN msg="central: ingest connection refused, too many open" max_conns=1 refused_in_a_row=1`
	if l := logs.String(); !strings.Contains(l, warned) {
		t.Errorf("the refusal was not logged (%s):\n%s", warned, l)
	}

	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	awaitReleased(t, released)
	if res, err := centraltest.Publish(context.Background(), p.IngestClient(t, two), treeUpload(t, "beta", two, 3)); err != nil || res.GetEventCount() != 3 {
		t.Fatalf("an upload once the open connection closed: %v, %v; want stored", res, err)
	}
}

// TestIngestBoundsConnectionsPerHost: with IngestMaxConnsPerHost
// connections open from one address, its next is closed as soon as it is
// accepted and logged with the address, while an appliance at another
// address still connects and uploads. Before, one host could hold every
// slot before authenticating.
func TestIngestBoundsConnectionsPerHost(t *testing.T) {
	var logs lockedbuf.Buffer
	p := centraltest.StartPlaneWith(t, func(c *central.Config) {
		c.IngestMaxConns = 8
		c.IngestMaxConnsPerHost = 1
		c.IngestHandshakeTimeout = time.Hour // only the bound closes a connection here
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	one := p.Fleet.Appliance(t, "app_one")
	if _, err := centraltest.Publish(context.Background(), p.IngestClient(t, one), treeUpload(t, "acme", one, 3)); err != nil {
		t.Fatal(err)
	}
	awaitRefused(t, p.Addrs.Ingest) // from 127.0.0.1 too
	const warned = `level=WARN msg="central: ingest connection refused, too many open from its address" remote_ip=127.0.0.1 max_conns_per_host=1 refused_in_a_row=1`
	if l := logs.String(); !strings.Contains(l, warned) {
		t.Errorf("the refusal was not logged (%s):\n%s", warned, l)
	}
	from2 := grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
		return d.DialContext(ctx, "tcp", addr)
	})
	two := p.Fleet.Appliance(t, "app_two")
	client := centralv1.NewCentralAuditServiceClient(p.IngestConn(t, two, from2))
	if res, err := centraltest.Publish(context.Background(), client, treeUpload(t, "acme", two, 3)); err != nil || res.GetEventCount() != 3 {
		t.Fatalf("an upload from another address: %v, %v; want stored", res, err)
	}
}

// TestIngestEndsStalledHandshakes: a connection that sends nothing (no TLS
// handshake) is closed after IngestHandshakeTimeout and gives its slot
// back, so that an appliance can connect. Before, gRPC's default of 120 s
// held it.
func TestIngestEndsStalledHandshakes(t *testing.T) {
	released := make(chan struct{}, 8)
	p := centraltest.StartPlaneWith(t, func(c *central.Config) {
		c.IngestMaxConns = 1
		c.IngestHandshakeTimeout = time.Second
		c.OnIngestConnClosed = func() { released <- struct{}{} }
	})
	awaitConnClosed(t, dialIngest(t, p))
	awaitReleased(t, released)
	// The upload's own handshake has the same bound: on a loaded machine
	// it may miss it, and its connection is then closed and released in
	// turn. A few attempts tell that apart from a slot still held, which
	// refuses every one of them.
	app := p.Fleet.Appliance(t, "app_one")
	var err error
	for range 3 {
		var res *centralv1.PublishHeadResponse
		if res, err = centraltest.Publish(context.Background(), p.IngestClient(t, app), treeUpload(t, "acme", app, 3)); err == nil {
			if res.GetEventCount() != 3 {
				t.Fatalf("stored %v, want 3 events", res)
			}
			return
		}
	}
	t.Fatalf("an upload once the stalled connection was closed: %v; want stored", err)
}
