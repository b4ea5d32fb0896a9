package central_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/central"
	"github.com/tollgate-dev/tollgate/central/centralclient"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
	"github.com/tollgate-dev/tollgate/internal/lockedbuf"
)

// awaitEnd waits, without sending anything more on the stream, for the
// plane to end it, and returns its status.
func awaitEnd(t *testing.T, stream centralv1.CentralAuditService_PublishHeadClient) error {
	t.Helper()
	ended := make(chan error, 1)
	go func() { ended <- stream.RecvMsg(new(centralv1.PublishHeadResponse)) }()
	select {
	case err := <-ended:
		return err
	case <-time.After(hangGuard):
		t.Fatalf("the stalled upload is still open after %s", hangGuard)
		return nil
	}
}

// awaitNoReceivers waits until no goroutine of the plane is left reading an
// upload's messages.
func awaitNoReceivers(t *testing.T) {
	t.Helper()
	const receiver = "central/service.receive.func"
	deadline := time.Now().Add(hangGuard)
	buf := make([]byte, 1<<20)
	for {
		for {
			n := runtime.Stack(buf, true)
			if n < len(buf) {
				buf = buf[:n]
				break
			}
			buf = make([]byte, 2*len(buf))
		}
		var left []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, receiver) {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a goroutine still reads an upload %s after it ended:\n%s", hangGuard, strings.Join(left, "\n\n"))
		}
		buf = buf[:cap(buf)]
		time.Sleep(10 * time.Millisecond)
	}
}

// TestIngestEndsIdleUploads: an upload that stops sending (before its
// start message, after it, or after a leaf chunk) is ended once it has
// been idle for IngestIdleTimeout, with DeadlineExceeded (which the
// forwarder retries rather than setting the head aside), logged with the
// appliance, and its share of the budget is free again: an upload that
// needs the only slot and every pending leaf is then stored. No goroutine
// is left reading the ended stream. Before, nothing timed out a silent
// stream: a peer that answered pings held its share for ever.
func TestIngestEndsIdleUploads(t *testing.T) {
	for _, stall := range []string{"before start", "after start", "after a leaf chunk"} {
		t.Run(stall, func(t *testing.T) {
			// 250ms, not less: the test's own steps between the
			// admission and the stall must fit in it on a loaded
			// machine under -race.
			endedUploadFreesItsShare(t, func(c *central.Config) { c.IngestIdleTimeout = 250 * time.Millisecond }, stall,
				"sent no message for 250ms", "level=WARN msg=\"central: upload ended, idle too long\" appliance_id=app_one")
		})
	}
}

// endedUploadFreesItsShare runs an upload that stalls (before its start
// message, after it, or after a leaf chunk) on a plane with one upload
// slot and 10 pending leaves, its timeouts set by tune. The plane must end
// it with DeadlineExceeded saying message, log logLine, leave no goroutine
// reading it, and free its share: an upload needing the only slot and
// every pending leaf is then stored.
func endedUploadFreesItsShare(t *testing.T, tune func(*central.Config), stall, message, logLine string) {
	t.Helper()
	var logs lockedbuf.Buffer
	admitted := make(chan int, 8)
	p := centraltest.StartPlaneWith(t, func(c *central.Config) {
		tune(c)
		c.IngestMaxUploads = 1
		c.MaxLeavesPerHead = 10
		c.IngestMaxPendingLeaves = 10
		c.OnUploadAdmitted = func(n int) { admitted <- n }
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	app := p.Fleet.Appliance(t, "app_one")
	client := p.IngestClient(t, app)

	var stream centralv1.CentralAuditService_PublishHeadClient
	if stall == "before start" {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		var err error
		if stream, err = client.PublishHead(ctx); err != nil {
			t.Fatal(err)
		}
	} else {
		o := startUpload(t, client, treeUpload(t, "acme", app, 10))
		awaitAdmitted(t, admitted, 10)
		if stall == "after a leaf chunk" {
			chunk := &centralv1.LeafChunk{Leaves: []*centralv1.Leaf{centralclient.LeafToProto(centralclient.Leaf(o.u.Leaves[0]))}}
			// io.EOF: the plane had ended the upload already, which
			// awaitEnd reports below.
			if err := o.stream.Send(&centralv1.PublishHeadRequest{Part: &centralv1.PublishHeadRequest_Leaves{Leaves: chunk}}); err != nil && !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
		}
		stream = o.stream
	}

	err := awaitEnd(t, stream)
	if st := status.Convert(err); st.Code() != codes.DeadlineExceeded || !strings.Contains(st.Message(), message) {
		t.Fatalf("an upload stalled %s: %v, want DeadlineExceeded, %s", stall, err, message)
	}
	if l := logs.String(); !strings.Contains(l, logLine) {
		t.Errorf("the ended upload was not logged as a warning with its appliance:\n%s", l)
	}
	awaitNoReceivers(t)

	u := treeUpload(t, "beta", app, 10)
	if res, err := centraltest.Publish(context.Background(), client, u); err != nil || res.GetEventCount() != 10 {
		t.Fatalf("an upload needing the ended one's slot and leaves: %v, %v; want stored", res, err)
	}
	awaitAdmitted(t, admitted, 10)
}

// TestIngestSteadyUploadOutlastsIdleTimeout: the idle timeout bounds the
// wait for each message, not the upload: one that sends a leaf at a time,
// each well within the timeout, and takes longer than the timeout in all
// is stored.
func TestIngestSteadyUploadOutlastsIdleTimeout(t *testing.T) {
	const idle, pause = 500 * time.Millisecond, 100 * time.Millisecond
	p := centraltest.StartPlaneWith(t, func(c *central.Config) { c.IngestIdleTimeout = idle })
	app := p.Fleet.Appliance(t, "app_one")
	o := startUpload(t, p.IngestClient(t, app), treeUpload(t, "acme", app, 8))
	for _, l := range o.u.Leaves {
		time.Sleep(pause)
		chunk := &centralv1.LeafChunk{Leaves: []*centralv1.Leaf{centralclient.LeafToProto(centralclient.Leaf(l))}}
		if err := o.stream.Send(&centralv1.PublishHeadRequest{Part: &centralv1.PublishHeadRequest_Leaves{Leaves: chunk}}); err != nil {
			break // the answer comes from CloseAndRecv
		}
	}
	time.Sleep(pause)
	if res, err := o.stream.CloseAndRecv(); err != nil || res.GetEventCount() != 8 {
		t.Fatalf("an upload of 8 leaves, one every %s, with an idle timeout of %s: %v, %v; want stored", pause, idle, res, err)
	}
}
