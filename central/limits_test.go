package central_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/central"
	"github.com/tollgate-dev/tollgate/central/auth"
	"github.com/tollgate-dev/tollgate/central/centralclient"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/ingest"
	"github.com/tollgate-dev/tollgate/central/store/boltstore"
	"github.com/tollgate-dev/tollgate/central/tlsconf"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
)

// hangGuard bounds every wait for an event in these tests; it is not a
// timing expectation.
const hangGuard = time.Minute

// openUpload is a PublishHead stream that has sent its start message and
// no leaf: an upload in progress, stalled until finish.
type openUpload struct {
	stream centralv1.CentralAuditService_PublishHeadClient
	u      ingest.Upload
}

// startUpload opens an upload of u and sends its start message.
func startUpload(t *testing.T, client centralv1.CentralAuditServiceClient, u ingest.Upload) *openUpload {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := client.PublishHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h, err := centralclient.HeadToProto(u.Head)
	if err != nil {
		t.Fatal(err)
	}
	start := &centralv1.PublishStart{Head: h, FirstLeafIndex: uint32(u.FirstLeafIndex), LeafRetentionDays: uint32(u.LeafRetentionDays)}
	if err := stream.Send(&centralv1.PublishHeadRequest{Part: &centralv1.PublishHeadRequest_Start{Start: start}}); err != nil {
		t.Fatal(err)
	}
	return &openUpload{stream: stream, u: u}
}

// finish sends the upload's leaves and returns the answer.
func (o *openUpload) finish() (*centralv1.PublishHeadResponse, error) {
	for i := 0; i < len(o.u.Leaves); i += centralclient.ChunkSize {
		part := o.u.Leaves[i:min(i+centralclient.ChunkSize, len(o.u.Leaves))]
		chunk := &centralv1.LeafChunk{}
		for _, l := range part {
			chunk.Leaves = append(chunk.Leaves, centralclient.LeafToProto(centralclient.Leaf(l)))
		}
		if err := o.stream.Send(&centralv1.PublishHeadRequest{Part: &centralv1.PublishHeadRequest_Leaves{Leaves: chunk}}); err != nil {
			break // the answer comes from CloseAndRecv
		}
	}
	return o.stream.CloseAndRecv()
}

// awaitAdmitted waits until the plane has admitted an upload of want
// leaves.
func awaitAdmitted(t *testing.T, admitted <-chan int, want int) {
	t.Helper()
	select {
	case n := <-admitted:
		if n != want {
			t.Fatalf("admitted an upload of %d leaves, want %d", n, want)
		}
	case <-time.After(hangGuard):
		t.Fatalf("no upload of %d leaves admitted within %s", want, hangGuard)
	}
}

// treeUpload is an upload of n new leaves of tenant's tree on app.
func treeUpload(t *testing.T, tenant string, app *fleet.Appliance, n int) ingest.Upload {
	t.Helper()
	tr := centraltest.NewTree(tenant, app)
	tr.AddFast(n)
	return tr.Upload(t, 0)
}

// TestIngestRefusesUploadsBeyondMax: with IngestMaxUploads uploads in
// progress (stalled by their appliances), one more is refused at once
// with Unavailable, which the forwarder retries; the stalled ones still
// complete, and the refused one passes once they have. Before, nothing
// bounded the uploads in progress, nor the memory they hold.
func TestIngestRefusesUploadsBeyondMax(t *testing.T) {
	admitted := make(chan int, 8)
	p := centraltest.StartPlaneWith(t, func(c *central.Config) {
		c.IngestMaxUploads = 2
		c.OnUploadAdmitted = func(n int) { admitted <- n }
	})
	var stalled []*openUpload
	for _, id := range []string{"app_one", "app_two"} {
		app := p.Fleet.Appliance(t, id)
		stalled = append(stalled, startUpload(t, p.IngestClient(t, app), treeUpload(t, "acme", app, 3)))
		awaitAdmitted(t, admitted, 3)
	}

	third := p.Fleet.Appliance(t, "app_three")
	client := p.IngestClient(t, third)
	u := treeUpload(t, "acme", third, 3)
	_, err := centraltest.Publish(context.Background(), client, u)
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "busy: 2 uploads in progress") {
		t.Fatalf("an upload beyond the 2 in progress: %v, want Unavailable, busy: 2 uploads in progress", err)
	}

	for i, o := range stalled {
		res, err := o.finish()
		if err != nil || res.GetEventCount() != 3 {
			t.Fatalf("stalled upload %d: %v, %v; want stored, event_count 3", i, res, err)
		}
	}
	if res, err := centraltest.Publish(context.Background(), client, u); err != nil || res.GetEventCount() != 3 {
		t.Fatalf("the refused upload once the others are done: %v, %v; want stored", res, err)
	}
}

// TestIngestRefusesUploadsBeyondPerAppliance: one appliance's uploads in
// progress are bounded on their own, so that one appliance (or a stolen
// certificate) cannot hold every slot of the plane: beside its stalled
// upload, a second of the same appliance is refused with Unavailable while
// another appliance's upload is stored, and the refused one passes once
// the first is done.
func TestIngestRefusesUploadsBeyondPerAppliance(t *testing.T) {
	admitted := make(chan int, 8)
	p := centraltest.StartPlaneWith(t, func(c *central.Config) {
		c.IngestMaxUploadsPerAppliance = 1
		c.OnUploadAdmitted = func(n int) { admitted <- n }
	})
	one := p.Fleet.Appliance(t, "app_one")
	client := p.IngestClient(t, one)
	stalled := startUpload(t, client, treeUpload(t, "acme", one, 3))
	awaitAdmitted(t, admitted, 3)

	ctx := context.Background()
	again := treeUpload(t, "beta", one, 2)
	_, err := centraltest.Publish(ctx, client, again)
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "appliance app_one has 1 uploads in progress") {
		t.Fatalf("a second upload of app_one: %v, want Unavailable, appliance app_one has 1 uploads in progress", err)
	}
	two := p.Fleet.Appliance(t, "app_two")
	if res, err := centraltest.Publish(ctx, p.IngestClient(t, two), treeUpload(t, "acme", two, 2)); err != nil || res.GetEventCount() != 2 {
		t.Fatalf("app_two beside app_one's stalled upload: %v, %v; want stored", res, err)
	}
	awaitAdmitted(t, admitted, 2)
	if res, err := stalled.finish(); err != nil || res.GetEventCount() != 3 {
		t.Fatalf("the stalled upload: %v, %v; want stored", res, err)
	}
	if res, err := centraltest.Publish(ctx, client, again); err != nil || res.GetEventCount() != 2 {
		t.Fatalf("app_one's refused upload once its first is done: %v, %v; want stored", res, err)
	}
}

// TestIngestRefusesLeavesBeyondBudget: the leaves of uploads in progress
// are bounded together: beside a stalled upload of 100 leaves, with a
// budget of 150, one of 60 is refused with Unavailable while one of 50
// fits; the 60 pass once the stalled upload is done.
func TestIngestRefusesLeavesBeyondBudget(t *testing.T) {
	admitted := make(chan int, 8)
	p := centraltest.StartPlaneWith(t, func(c *central.Config) {
		c.MaxLeavesPerHead = 100
		c.IngestMaxPendingLeaves = 150
		c.OnUploadAdmitted = func(n int) { admitted <- n }
	})
	staller := p.Fleet.Appliance(t, "app_stalls")
	big := startUpload(t, p.IngestClient(t, staller), treeUpload(t, "acme", staller, 100))
	awaitAdmitted(t, admitted, 100)
	app := p.Fleet.Appliance(t, "app_one")
	client := p.IngestClient(t, app)

	ctx := context.Background()
	over := treeUpload(t, "beta", app, 60)
	_, err := centraltest.Publish(ctx, client, over)
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "hold up to 150 leaves, this one needs 60") {
		t.Fatalf("60 leaves beside 100 of 150: %v, want Unavailable, hold up to 150 leaves, this one needs 60", err)
	}
	if res, err := centraltest.Publish(ctx, client, treeUpload(t, "gamma", app, 50)); err != nil || res.GetEventCount() != 50 {
		t.Fatalf("50 leaves beside 100 of 150: %v, %v; want stored", res, err)
	}
	awaitAdmitted(t, admitted, 50)
	if res, err := big.finish(); err != nil || res.GetEventCount() != 100 {
		t.Fatalf("the stalled upload: %v, %v; want stored", res, err)
	}
	if res, err := centraltest.Publish(ctx, client, over); err != nil || res.GetEventCount() != 60 {
		t.Fatalf("the refused upload once the budget is free: %v, %v; want stored", res, err)
	}
}

// TestIngestBoundsOneAppliancesLeaves: one appliance's uploads in progress
// hold at most the largest upload's leaves, so that it cannot hold the
// whole pending-leaf budget (two of the largest uploads) for the upload
// time: beside its stalled upload of 100 leaves, its second of 100 is
// refused while another appliance's 100 are stored. Before, the second
// was admitted and the other appliance refused.
func TestIngestBoundsOneAppliancesLeaves(t *testing.T) {
	admitted := make(chan int, 8)
	p := centraltest.StartPlaneWith(t, func(c *central.Config) {
		c.MaxLeavesPerHead = 100
		c.IngestMaxPendingLeaves = 200
		c.OnUploadAdmitted = func(n int) { admitted <- n }
	})
	one := p.Fleet.Appliance(t, "app_one")
	client := p.IngestClient(t, one)
	stalled := startUpload(t, client, treeUpload(t, "acme", one, 100))
	awaitAdmitted(t, admitted, 100)

	ctx := context.Background()
	again := treeUpload(t, "beta", one, 100)
	_, err := centraltest.Publish(ctx, client, again)
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "appliance app_one's uploads in progress hold up to 100 leaves") {
		t.Fatalf("app_one's second upload of 100: %v, want Unavailable, its share", err)
	}
	two := p.Fleet.Appliance(t, "app_two")
	if res, err := centraltest.Publish(ctx, p.IngestClient(t, two), treeUpload(t, "acme", two, 100)); err != nil || res.GetEventCount() != 100 {
		t.Fatalf("app_two beside app_one's stalled upload: %v, %v; want stored", res, err)
	}
	awaitAdmitted(t, admitted, 100)
	if res, err := stalled.finish(); err != nil || res.GetEventCount() != 100 {
		t.Fatalf("the stalled upload: %v, %v; want stored", res, err)
	}
	if res, err := centraltest.Publish(ctx, client, again); err != nil || res.GetEventCount() != 100 {
		t.Fatalf("app_one's refused upload once its first is done: %v, %v; want stored", res, err)
	}
}

// TestIngestRefusesLeavesBeyondAnnounced: an upload that sends more leaves
// than its start message announced (and so reserved) is refused as soon as
// they arrive, with the refusal the plane gives a wrong number of leaves.
func TestIngestRefusesLeavesBeyondAnnounced(t *testing.T) {
	p := centraltest.StartPlane(t)
	app := p.Fleet.Appliance(t, "app_one")
	tr := centraltest.NewTree("acme", app)
	tr.AddFast(4)
	u := tr.Upload(t, 0)
	u.Head = tr.HeadAt(t, 2, time.Now())
	_, err := centraltest.Publish(context.Background(), p.IngestClient(t, app), u)
	if reason, _, ok := centralclient.RefusalOf(err); status.Code(err) != codes.InvalidArgument || !ok || reason != ingest.ReasonInvalidLeaves {
		t.Fatalf("4 leaves for a head that adds 2: %v, want InvalidArgument, %s", err, ingest.ReasonInvalidLeaves)
	}
}

// TestIngestBudgetBelowUpload: a pending-leaf budget that cannot hold the
// largest upload is a configuration error, not an upload refused as busy
// for ever.
func TestIngestBudgetBelowUpload(t *testing.T) {
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "central.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cert, _, err := tlsconf.SelfSigned("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	err = central.Run(ctx, central.Config{
		Store: st, Tokens: auth.NewTokens(), FleetCA: centraltest.NewFleet(t).CA.Cert, IngestCert: cert,
		RESTAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", IngestAddr: "127.0.0.1:0",
		MaxLeavesPerHead: 100, IngestMaxPendingLeaves: 99,
	})
	if err == nil || !strings.Contains(err.Error(), "99 pending leaves cannot hold an upload of 100 leaves") {
		t.Fatalf("Run with 99 pending leaves and uploads of 100: %v", err)
	}
}

// rawIngest is an HTTP/2 connection to the ingest listener with an
// appliance certificate, spoken frame by frame: it shows what the server
// advertises and does, whatever a gRPC client would make of it.
type rawIngest struct {
	conn *tls.Conn
	fr   *http2.Framer
}

func dialRawIngest(t *testing.T, p *centraltest.Plane, app *fleet.Appliance) *rawIngest {
	t.Helper()
	roots, err := tlsconf.Pool(p.ServerCertPEM)
	if err != nil {
		t.Fatal(err)
	}
	cfg := tlsconf.Appliance(app, roots, "127.0.0.1")
	cfg.NextProtos = []string{"h2"}
	conn, err := tls.Dial("tcp", p.Addrs.Ingest, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if err := conn.SetDeadline(time.Now().Add(hangGuard)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	r := &rawIngest{conn: conn, fr: http2.NewFramer(conn, conn)}
	if err := r.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return r
}

// serverSettings reads the server's first frame, its settings.
func (r *rawIngest) serverSettings(t *testing.T) *http2.SettingsFrame {
	t.Helper()
	f, err := r.fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		t.Fatalf("the server's first frame is %v, want its settings", f)
	}
	if err := r.fr.WriteSettingsAck(); err != nil {
		t.Fatal(err)
	}
	return sf
}

// openPublish opens a PublishHead stream (headers only; nothing sent).
func (r *rawIngest) openPublish(t *testing.T, streamID uint32) {
	t.Helper()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, hf := range []hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "https"},
		{Name: ":path", Value: "/" + centralv1.CentralAuditService_ServiceDesc.ServiceName + "/PublishHead"},
		{Name: ":authority", Value: "127.0.0.1"}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
	} {
		if err := enc.WriteField(hf); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: streamID, BlockFragment: block.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
}

// TestIngestBoundsStreamsPerConnection: the ingest listener advertises
// IngestMaxStreams concurrent streams per connection and refuses a stream
// beyond them (REFUSED_STREAM, which a client may retry), so one
// connection cannot open uploads without bound. Before, gRPC's default
// advertised no limit and accepted every stream.
func TestIngestBoundsStreamsPerConnection(t *testing.T) {
	// The streams' uploads are one appliance's: its own bound must not
	// end them first.
	p := centraltest.StartPlaneWith(t, func(c *central.Config) { c.IngestMaxUploadsPerAppliance = 2 * central.DefaultIngestMaxStreams })
	r := dialRawIngest(t, p, p.Fleet.Appliance(t, "app_one"))
	var limit uint32
	var advertised bool
	_ = r.serverSettings(t).ForeachSetting(func(s http2.Setting) error {
		if s.ID == http2.SettingMaxConcurrentStreams {
			limit, advertised = s.Val, true
		}
		return nil
	})
	if !advertised || limit != central.DefaultIngestMaxStreams {
		t.Fatalf("SETTINGS_MAX_CONCURRENT_STREAMS %d (advertised: %v), want %d", limit, advertised, central.DefaultIngestMaxStreams)
	}

	// One stream more than advertised, all left open: the last is refused.
	last := uint32(2*central.DefaultIngestMaxStreams + 1)
	for id := uint32(1); id <= last; id += 2 {
		r.openPublish(t, id)
	}
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading until stream %d is answered: %v", last, err)
		}
		rst, ok := f.(*http2.RSTStreamFrame)
		if !ok {
			continue // settings ack, window updates
		}
		if rst.StreamID != last || rst.ErrCode != http2.ErrCodeRefusedStream {
			t.Fatalf("stream %d reset with %v, want only stream %d, REFUSED_STREAM", rst.StreamID, rst.ErrCode, last)
		}
		return
	}
}

// TestIngestClosesIdleConnections: a connection that answers pings but
// carries no upload is closed gracefully once it has been idle for
// IngestMaxConnIdle. Before, it held a connection slot for ever.
func TestIngestClosesIdleConnections(t *testing.T) {
	p := centraltest.StartPlaneWith(t, func(c *central.Config) { c.IngestMaxConnIdle = 200 * time.Millisecond })
	r := dialRawIngest(t, p, p.Fleet.Appliance(t, "app_one"))
	r.serverSettings(t)
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			t.Fatalf("no GOAWAY before the connection ended or %s passed: %v", hangGuard, err)
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			if g.ErrCode != http2.ErrCodeNo {
				t.Fatalf("GOAWAY %v, want NO_ERROR (a graceful close)", g.ErrCode)
			}
			return
		}
	}
}

// TestIngestKeepaliveClosesDeadPeer: a connection that stays silent is
// pinged, and closed when the ping goes unanswered, so that a vanished
// appliance's uploads end and return their budget. Before, gRPC's default
// pinged after two hours.
func TestIngestKeepaliveClosesDeadPeer(t *testing.T) {
	p := centraltest.StartPlaneWith(t, func(c *central.Config) {
		c.IngestKeepalive = time.Second
		c.IngestKeepaliveTimeout = time.Second
	})
	r := dialRawIngest(t, p, p.Fleet.Appliance(t, "app_one"))
	r.serverSettings(t)
	pinged := false
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			var ne interface{ Timeout() bool }
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the connection is still open after %s (pinged: %v)", hangGuard, pinged)
			}
			break // closed
		}
		if ping, ok := f.(*http2.PingFrame); ok && !ping.IsAck() {
			pinged = true // and never answered
		}
		if _, ok := f.(*http2.GoAwayFrame); ok {
			break
		}
	}
	if !pinged {
		t.Fatal("the connection was closed without a ping")
	}
}
