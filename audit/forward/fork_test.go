package forward_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/audit/forward"
	"github.com/tollgate-dev/tollgate/central/centralclient"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/internal/lockedbuf"
)

// TestForkedHeadRefused: a head that disagrees with the tree the central
// plane holds for its appliance, tenant and day (another holder of the
// appliance's key published a larger one first) is refused as
// inconsistent: set aside as refused for good and logged as an error,
// not dropped as superseded like a stale head.
func TestForkedHeadRefused(t *testing.T) {
	e := setup(t)
	logs := &lockedbuf.Buffer{}
	e.tweak = func(o *forward.Options) { o.Logger = slog.New(slog.NewJSONHandler(logs, nil)) }
	_ = e.fwd.Close()
	e.open(t)

	app := e.plane.Fleet.Appliance(t, "app_fwd")
	fork := centraltest.NewTree("acme", app)
	fork.Day = e.clock.Now().UTC().Format("2006-01-02")
	fork.Add(5)
	if _, err := centraltest.Publish(context.Background(), e.plane.IngestClient(t, app), fork.Upload(t, 0)); err != nil {
		t.Fatal(err)
	}
	e.record(t, "acme", 2)
	e.sign(t)
	e.collect(t, 1)
	if err := e.fwd.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b := e.fwd.Backlog(); b.Heads != 0 || b.Refused != 1 {
		t.Fatalf("backlog %+v, want the head refused", b)
	}
	var found bool
	for line := range strings.Lines(logs.String()) {
		var l struct{ Level, Msg, Reason string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Reason == centralclient.ReasonInconsistent {
			if l.Level != "ERROR" || l.Msg != "central forwarder: head refused by the central plane" {
				t.Fatalf("the refusal logged as %s", line)
			}
			found = true
		}
	}
	if !found {
		t.Fatalf("no refusal inconsistent in the log:\n%s", logs.String())
	}
}
