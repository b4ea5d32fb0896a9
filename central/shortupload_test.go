package central_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/central/centralclient"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/central/tlsconf"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
)

// gatedConn is a connection whose writes the test can hold, then fail.
type gatedConn struct {
	net.Conn
	mu      sync.Mutex
	held    bool
	once    sync.Once
	blocked chan struct{} // closed once a write waits on the gate
	failed  chan struct{} // closed by fail
}

func (c *gatedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	held := c.held
	c.mu.Unlock()
	if !held {
		return c.Conn.Write(p)
	}
	c.once.Do(func() { close(c.blocked) })
	<-c.failed
	return 0, errors.New("connection failed by the test")
}

// hold makes the next write wait until fail.
func (c *gatedConn) hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held = true
}

// fail ends the held write with an error.
func (c *gatedConn) fail() { close(c.failed) }

// pausing hands out its PublishHead stream only once the test lets it.
type pausing struct {
	centralv1.CentralAuditServiceClient
	opened, resume chan struct{}
}

func (p pausing) PublishHead(ctx context.Context, opts ...grpc.CallOption) (grpc.ClientStreamingClient[centralv1.PublishHeadRequest, centralv1.PublishHeadResponse], error) {
	s, err := p.CentralAuditServiceClient.PublishHead(ctx, opts...)
	close(p.opened)
	<-p.resume
	return s, err
}

// TestUploadReplayedShort: the connection an upload's stream was opened
// on is lost before the stream reached the central plane, and the
// appliance's Send fails. gRPC retries the stream on a new connection,
// transparently, replaying what was sent: the start message; Publish,
// which stopped sending at the failure and asked for the status, ends the
// stream there. The plane refused the upload, missing its leaves, for good
// (invalid_leaves), and the forwarder set the head aside, never to be
// stored. An upload that ends before its leaves is incomplete, not wrong:
// the plane answers Aborted, and the head, sent again whole, is stored.
func TestUploadReplayedShort(t *testing.T) {
	p := centraltest.StartPlane(t)
	app := p.Fleet.Appliance(t, "app_pub")
	roots, err := tlsconf.Pool(p.ServerCertPEM)
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan *gatedConn, 1)
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		g := &gatedConn{Conn: c, blocked: make(chan struct{}), failed: make(chan struct{})}
		select {
		case first <- g: // only the first connection is gated
			return g, nil
		default:
			return c, nil
		}
	}
	conn, err := grpc.NewClient(p.Addrs.Ingest, grpc.WithContextDialer(dial),
		grpc.WithTransportCredentials(credentials.NewTLS(tlsconf.Appliance(app, roots, "127.0.0.1"))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := centralv1.NewCentralAuditServiceClient(conn)

	tree := centraltest.NewTree("acme", app)
	tree.Add(2)
	ctx := context.Background()
	if _, err := centraltest.Publish(ctx, client, tree.Upload(t, 0)); err != nil {
		t.Fatal(err)
	}
	tree.Add(3)
	up := centraltest.ClientUpload(tree.Upload(t, 2))

	// The connection's writer is held on another stream's headers, so that
	// the upload's stream waits behind them, not yet sent, when the
	// connection fails.
	gated := <-first
	gated.hold()
	other, err := client.PublishHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-gated.blocked
	pc := pausing{CentralAuditServiceClient: client, opened: make(chan struct{}), resume: make(chan struct{})}
	published := make(chan error, 1)
	go func() {
		_, err := centralclient.Publish(ctx, pc, up)
		published <- err
	}()
	<-pc.opened
	// The connection is lost: its reader fails first, and the transport,
	// closing, leaves the channel ready no more; then the held write fails
	// too, and the writer drops the upload's stream, not yet sent.
	_ = gated.Close()
	wctx, cancel := context.WithTimeout(ctx, hangGuard)
	defer cancel()
	if !conn.WaitForStateChange(wctx, connectivity.Ready) {
		t.Fatal("the channel stayed ready after its connection was lost")
	}
	gated.fail()
	// The other stream ends once the writer has stopped; the upload goes
	// on after that.
	if _, err := other.CloseAndRecv(); err == nil {
		t.Fatal("the other stream on the lost connection succeeded")
	}
	close(pc.resume)
	err = <-published
	if reason, _, refused := centralclient.RefusalOf(err); refused || status.Code(err) != codes.Aborted {
		t.Fatalf("Publish after the connection was lost: %v (refusal %q), want Aborted, no refusal", err, reason)
	}
	// Sent again whole, the upload is stored.
	if _, err := centralclient.Publish(ctx, client, up); err != nil {
		t.Fatalf("Publish again: %v", err)
	}
	got, err := p.Store.Tree(ctx, store.TreeOf(up.Head))
	if err != nil || got.Head != up.Head {
		t.Fatalf("central holds %+v (%v), want the head of 5 leaves", got.Head, err)
	}
}

// TestUploadEndedShort: a stream that ends before the leaves its start
// announced is answered Aborted, which an appliance retries, not refused;
// one that sends more is refused (TestIngestRefusesLeavesBeyondAnnounced).
func TestUploadEndedShort(t *testing.T) {
	p := centraltest.StartPlane(t)
	app := p.Fleet.Appliance(t, "app_short")
	client := p.IngestClient(t, app)
	tree := centraltest.NewTree("acme", app)
	tree.Add(3)
	up := centraltest.ClientUpload(tree.Upload(t, 0))
	h, err := centralclient.HeadToProto(up.Head)
	if err != nil {
		t.Fatal(err)
	}
	for _, sent := range []int{0, 2} {
		stream, err := client.PublishHead(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		msgs := []*centralv1.PublishHeadRequest{{Part: &centralv1.PublishHeadRequest_Start{Start: &centralv1.PublishStart{Head: h, LeafRetentionDays: 30}}}}
		if sent > 0 {
			chunk := &centralv1.LeafChunk{}
			for _, l := range up.Leaves[:sent] {
				chunk.Leaves = append(chunk.Leaves, centralclient.LeafToProto(l))
			}
			msgs = append(msgs, &centralv1.PublishHeadRequest{Part: &centralv1.PublishHeadRequest_Leaves{Leaves: chunk}})
		}
		for _, m := range msgs {
			if err := stream.Send(m); err != nil {
				t.Fatal(err)
			}
		}
		_, err = stream.CloseAndRecv()
		if reason, _, refused := centralclient.RefusalOf(err); refused || status.Code(err) != codes.Aborted {
			t.Fatalf("%d of 3 leaves, then the end: %v (refusal %q), want Aborted, no refusal", sent, err, reason)
		}
	}
	if _, err := centralclient.Publish(context.Background(), client, up); err != nil {
		t.Fatalf("the whole upload: %v", err)
	}
}
