package central_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/central"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/service"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
	"github.com/tollgate-dev/tollgate/internal/lockedbuf"
)

// TestIngestEndsUploadsPastMaxTime: an upload that has not closed within
// IngestMaxUploadTime of its start is ended, although no wait for one
// message reaches the idle timeout (an hour here), with DeadlineExceeded
// (which the forwarder retries), logged with the appliance, and its share
// of the budget is free again: an upload that needs the only slot and
// every pending leaf is then stored. Before, an upload that sent a
// message just inside the idle timeout each time could last for ever.
func TestIngestEndsUploadsPastMaxTime(t *testing.T) {
	for _, stall := range []string{"after start", "after a leaf chunk"} {
		t.Run(stall, func(t *testing.T) {
			var logs lockedbuf.Buffer
			admitted := make(chan int, 8)
			p := centraltest.StartPlaneWith(t, func(c *central.Config) {
				c.IngestIdleTimeout = time.Hour
				c.IngestMaxUploadTime = 200 * time.Millisecond
				c.IngestMaxUploads = 1
				c.MaxLeavesPerHead = 10
				c.IngestMaxPendingLeaves = 10
				c.OnUploadAdmitted = func(n int) { admitted <- n }
				c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			})
			app := p.Fleet.Appliance(t, "app_one")
			client := p.IngestClient(t, app)

			o := startUpload(t, client, treeUpload(t, "acme", app, 10))
			awaitAdmitted(t, admitted, 10)
			if stall == "after a leaf chunk" {
				chunk := &centralv1.LeafChunk{Leaves: []*centralv1.Leaf{service.LeafToProto(o.u.Leaves[0])}}
				if err := o.stream.Send(&centralv1.PublishHeadRequest{Part: &centralv1.PublishHeadRequest_Leaves{Leaves: chunk}}); err != nil {
					t.Fatal(err)
				}
			}

			err := awaitEnd(t, o.stream)
			if st := status.Convert(err); st.Code() != codes.DeadlineExceeded || !strings.Contains(st.Message(), "took longer than 200ms") {
				t.Fatalf("an upload open past its time, %s: %v, want DeadlineExceeded, took longer than 200ms", stall, err)
			}
			if l := logs.String(); !strings.Contains(l, "level=WARN msg=\"central: upload ended, took too long\" appliance_id=app_one max_upload_time=200ms") {
				t.Errorf("the upload was not logged as a warning with its appliance:\n%s", l)
			}
			awaitNoReceivers(t)

			u := treeUpload(t, "beta", app, 10)
			if res, err := service.Publish(context.Background(), client, u); err != nil || res.GetEventCount() != 10 {
				t.Fatalf("an upload needing the ended one's slot and leaves: %v, %v; want stored", res, err)
			}
			awaitAdmitted(t, admitted, 10)
		})
	}
}
