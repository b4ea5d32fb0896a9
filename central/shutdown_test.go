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
	"github.com/tollgate-dev/tollgate/internal/lockedbuf"
)

// TestShutdownCutsStalledUpload: an upload that an appliance opened and
// left stalled is cut at the end of the grace, and the plane stops. Before,
// the ingest server waited for it for ever, and so did the process.
func TestShutdownCutsStalledUpload(t *testing.T) {
	var logs lockedbuf.Buffer
	p := centraltest.StartPlaneWith(t, func(c *central.Config) {
		c.ShutdownGrace = 10 * time.Millisecond
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	app := p.Fleet.Appliance(t, "app_one")
	client := p.IngestClient(t, app)
	ctx := context.Background()
	stalled, err := client.PublishHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A whole upload on the same connection: once it is answered, the
	// server has read the stalled stream's headers, sent before its own,
	// and runs its handler.
	tr := centraltest.NewTree("acme", app)
	tr.Add(2)
	if _, err := centraltest.Publish(ctx, client, tr.Upload(t, 0)); err != nil {
		t.Fatal(err)
	}

	if err := p.Stop(t); err != nil {
		t.Fatal(err)
	}
	if _, err := stalled.CloseAndRecv(); status.Code(err) != codes.Unavailable && status.Code(err) != codes.Canceled {
		t.Errorf("stalled upload ended with %v, want Unavailable or Canceled", err)
	}
	if !strings.Contains(logs.String(), "cut") {
		t.Errorf("cutting the stalled upload was not logged:\n%s", logs.String())
	}
}
