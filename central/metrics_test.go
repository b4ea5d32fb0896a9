package central_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/central"
	"github.com/tollgate-dev/tollgate/central/centralclient"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/ingest"
	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/internal/ids"
	"github.com/tollgate-dev/tollgate/internal/webtest"
)

// TestMetrics runs the plane with its metrics listener: an upload in
// progress, one refused as busy beside it, stored heads, a resend, a
// forked head, a leaf gap and REST queries are counted on /metrics, each
// in its own series.
func TestMetrics(t *testing.T) {
	admitted := make(chan int, 16)
	p := centraltest.StartPlaneWith(t, func(c *central.Config) {
		c.MetricsAddr = "127.0.0.1:0"
		c.PruneTicks = make(chan time.Time) // one pass, at start
		c.IngestMaxUploadsPerAppliance = 1
		c.OnUploadAdmitted = func(n int) { admitted <- n }
	})
	if p.Addrs.Metrics == "" {
		t.Fatal("no metrics address")
	}
	ctx := context.Background()

	// An upload in progress holds a slot and its leaves, and its
	// appliance's next upload is refused as busy.
	two := p.Fleet.Appliance(t, "app_two")
	stalled := startUpload(t, p.IngestClient(t, two), treeUpload(t, "acme", two, 4))
	awaitAdmitted(t, admitted, 4)
	awaitMetrics(t, p, "tollgate_central_ingest_uploads_in_progress 1", "tollgate_central_ingest_pending_leaves 4")
	if _, err := centraltest.Publish(ctx, p.IngestClient(t, two), treeUpload(t, "beta", two, 1)); status.Code(err) != codes.Unavailable {
		t.Fatalf("beside the stalled upload: %v, want busy", err)
	}
	if res, err := stalled.finish(); err != nil || res.GetEventCount() != 4 {
		t.Fatalf("the stalled upload: %v, %v", res, err)
	}

	if err := p.Tokens.SetAuditTokens(ctx, "acme", []string{acmeToken}); err != nil {
		t.Fatal(err)
	}
	app := p.Fleet.Appliance(t, "app_one")
	tr := centraltest.NewTree("acme", app)
	tr.Add(3)
	first := tr.Upload(t, 0)
	client := p.IngestClient(t, app)
	if res, err := centraltest.Publish(ctx, client, first); err != nil || res.GetDuplicate() {
		t.Fatalf("publish: %v, %v", res, err)
	}
	if res, err := centraltest.Publish(ctx, client, first); err != nil || !res.GetDuplicate() {
		t.Fatalf("resend: %v, %v", res, err)
	}
	// Another view of the same tree (same tenant, appliance and day),
	// smaller than the stored head: a fork.
	fork := centraltest.NewTree("acme", app)
	fork.Add(2)
	_, err := centraltest.Publish(ctx, client, ingest.Upload{Head: fork.HeadAt(t, 2, time.Now()), FirstLeafIndex: 2, LeafRetentionDays: 90})
	if reason, _, _ := centralclient.RefusalOf(err); reason != ingest.ReasonInconsistent {
		t.Fatalf("fork: %v", err)
	}
	tr.Add(2)
	_, err = centraltest.Publish(ctx, client, tr.Upload(t, 4))
	if reason, _, _ := centralclient.RefusalOf(err); reason != ingest.ReasonLeafGap {
		t.Fatalf("gap: %v", err)
	}
	if res, err := centraltest.Publish(ctx, client, tr.Upload(t, 3)); err != nil || res.GetEventCount() != 5 {
		t.Fatalf("publish the rest: %v, %v", res, err)
	}

	day := tr.Day
	for path, want := range map[string]int{
		"/v1/tenants/acme/audit/heads?day=" + day: http.StatusOK,
		"/v1/tenants/acme/audit/proof?appliance_id=app_one&day=" + day + "&request_id=" + tr.Leaves[0].RequestID: http.StatusOK,
		"/v1/tenants/acme/audit/forks":   http.StatusOK,
		"/v1/tenants/acme/audit/nothing": http.StatusNotFound,
	} {
		if st, _, body := webtest.Get(t, p.BaseURL+path, acmeToken); st != want {
			t.Fatalf("GET %s: %d %s", path, st, body)
		}
	}
	if st, _, _ := webtest.Get(t, p.BaseURL+"/v1/tenants/acme/audit/heads?day="+day, ""); st != http.StatusUnauthorized {
		t.Fatalf("heads without a token: %d", st)
	}

	awaitMetrics(t, p,
		`tollgate_central_ingest_uploads_total{outcome="stored"} 3`,
		`tollgate_central_ingest_uploads_total{outcome="duplicate"} 1`,
		`tollgate_central_ingest_uploads_total{outcome="refused"} 2`,
		`tollgate_central_ingest_uploads_total{outcome="busy"} 1`,
		`tollgate_central_ingest_uploads_total{outcome="failed"} 0`,
		`tollgate_central_ingest_refusals_total{reason="inconsistent"} 1`,
		`tollgate_central_ingest_refusals_total{reason="leaf_gap"} 1`,
		`tollgate_central_ingest_fork_evidence_total{outcome="recorded"} 1`,
		`tollgate_central_ingest_fork_evidence_total{outcome="failed"} 0`,
		`tollgate_central_ingest_refusals_total{reason="stale_head"} 0`,
		"tollgate_central_ingest_leaves_total 9",
		"tollgate_central_ingest_uploads_in_progress 0",
		"tollgate_central_ingest_pending_leaves 0",
		`tollgate_central_rest_requests_total{code="200",route="heads"} 1`,
		`tollgate_central_rest_requests_total{code="401",route="heads"} 1`,
		`tollgate_central_rest_requests_total{code="200",route="proof"} 1`,
		`tollgate_central_rest_requests_total{code="200",route="forks"} 1`,
		`tollgate_central_rest_requests_total{code="404",route="other"} 1`,
		`tollgate_central_rest_request_duration_seconds_count{route="heads"} 2`,
		`tollgate_central_rest_request_duration_seconds_count{route="proof"} 1`,
		`tollgate_central_rest_request_duration_seconds_count{route="other"} 1`,
		`tollgate_central_prune_runs_total{outcome="ok"} 1`,
		"tollgate_central_pruned_trees_total 0",
	)
}

// awaitMetrics polls the plane's /metrics until it has every line of
// want: the plane counts an upload once its answer is sent, and a REST
// request once its answer is written, after the client may have read it.
func awaitMetrics(t *testing.T, p *centraltest.Plane, want ...string) {
	t.Helper()
	var body []byte
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(hangGuard)
	for {
		var lacking []string
		if body, lacking = scrapeMetrics(t, p, want); len(lacking) == 0 {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("/metrics has not every line of %q within %s (a hang guard):\n%s", want, hangGuard, body)
		}
	}
}

// checkMetrics fails unless the plane's /metrics has every line of want
// now, for what the plane counted before the test learnt of it.
func checkMetrics(t *testing.T, p *centraltest.Plane, want ...string) {
	t.Helper()
	if body, lacking := scrapeMetrics(t, p, want); len(lacking) > 0 {
		t.Fatalf("/metrics lacks %q:\n%s", lacking, body)
	}
}

// scrapeMetrics returns the plane's /metrics and the lines of want it
// lacks (all of them if it does not answer 200).
func scrapeMetrics(t *testing.T, p *centraltest.Plane, want []string) ([]byte, []string) {
	t.Helper()
	st, _, body := webtest.Get(t, "http://"+p.Addrs.Metrics+"/metrics", "")
	if st != http.StatusOK {
		return body, want
	}
	var lacking []string
	for _, w := range want {
		if !bytes.Contains(body, []byte("\n"+w+"\n")) {
			lacking = append(lacking, w)
		}
	}
	return body, lacking
}

// TestPruneMetrics: the retention counters count trees, each in its own
// series: a pass that prunes the leaves of two trees adds 2 to
// tollgate_central_pruned_leaf_trees_total, one that deletes three trees
// whole adds 3 to tollgate_central_pruned_trees_total, and each pass adds
// 1 to tollgate_central_prune_runs_total. The three totals differ, so
// that a counter fed the other's count, or counting passes instead of
// trees, is caught.
func TestPruneMetrics(t *testing.T) {
	// Two trees whose leaves are kept 30 days, one 90 days: trees an older
	// plane stored, with the appliance's body retention.
	retention := map[string]int{"acme": 30, "globex": 30, "initech": 90}
	older := committedByOlderPlane(func(id store.TreeID) int { return retention[id.TenantID] })
	p, prune := startPrunedPlane(t, func(c *central.Config) { c.MetricsAddr = "127.0.0.1:0"; older(c) })
	ctx := context.Background()
	app := p.Fleet.Appliance(t, "app_one")
	client := p.IngestClient(t, app)
	day := ids.Day(time.Now())
	for tenant := range retention {
		tr := centraltest.NewTree(tenant, app)
		tr.Day = day
		tr.Add(2)
		u := tr.Upload(t, 0)
		if _, err := centraltest.Publish(ctx, client, u); err != nil {
			t.Fatalf("publish %s: %v", tenant, err)
		}
	}
	leavesExpire, _ := store.LeavesExpire(day, 30)
	headsExpire, _ := store.HeadsExpire(day)
	for _, pass := range []struct {
		at   time.Time
		want store.Pruned
	}{
		{leavesExpire.Add(-time.Second), store.Pruned{}},
		{leavesExpire, store.Pruned{LeafTrees: 2}},
		// The tree kept 90 days goes whole, without its leaves first.
		{headsExpire, store.Pruned{Trees: 3}},
	} {
		if got := prune(pass.at); got != pass.want {
			t.Fatalf("pass at %s: %+v, want %+v", pass.at, got, pass.want)
		}
	}
	// The plane counts a pass before it reports it (OnPrune).
	checkMetrics(t, p,
		`tollgate_central_prune_runs_total{outcome="ok"} 4`,
		`tollgate_central_prune_runs_total{outcome="failed"} 0`,
		"tollgate_central_pruned_leaf_trees_total 2",
		"tollgate_central_pruned_trees_total 3",
	)
}

// failingForks is a store whose RecordFork fails while fail is set.
type failingForks struct {
	store.Store
	fail atomic.Bool
}

func (f *failingForks) RecordFork(ctx context.Context, fk store.Fork, maxPerTree int) (bool, error) {
	if f.fail.Load() {
		return false, errors.New("the disk is on fire")
	}
	return f.Store.RecordFork(ctx, fk, maxPerTree)
}

// TestForkEvidenceMetrics: what becomes of each fork's evidence is
// counted in its own series, the refusal counter counting every fork
// beside it: three recorded (one per tree), one sent again, two past the
// bound of one fork per tree, four the store failed to keep. The totals
// differ, so that a series fed another's count is caught.
func TestForkEvidenceMetrics(t *testing.T) {
	ff := &failingForks{}
	p := centraltest.StartPlaneWith(t, func(c *central.Config) {
		c.MetricsAddr = "127.0.0.1:0"
		c.MaxForksPerTree = 1
		ff.Store = c.Store
		c.Store = ff
	})
	var trees []*centraltest.Tree
	for _, tenant := range []string{"acme", "globex", "initech"} {
		tr := centraltest.NewTree(tenant, p.Fleet.Appliance(t, "app_one"))
		tr.Add(3)
		if _, err := centraltest.Publish(context.Background(), p.IngestClient(t, tr.App), tr.Upload(t, 0)); err != nil {
			t.Fatal(err)
		}
		trees = append(trees, tr)
	}
	first := publishFork(t, p, trees[0], 3)
	publishFork(t, p, trees[1], 2)
	publishFork(t, p, trees[2], 1)
	_, err := centraltest.Publish(context.Background(), p.IngestClient(t, trees[0].App), ingest.Upload{Head: first, FirstLeafIndex: 3, LeafRetentionDays: 90})
	if reason, _, _ := centralclient.RefusalOf(err); reason != ingest.ReasonInconsistent {
		t.Fatalf("the fork sent again: %v", err)
	}
	publishFork(t, p, trees[0], 2)
	publishFork(t, p, trees[1], 1)
	ff.fail.Store(true)
	for _, tr := range []*centraltest.Tree{trees[0], trees[1], trees[2], trees[2]} {
		publishFork(t, p, tr, 2)
	}
	awaitMetrics(t, p,
		`tollgate_central_ingest_fork_evidence_total{outcome="recorded"} 3`,
		`tollgate_central_ingest_fork_evidence_total{outcome="duplicate"} 1`,
		`tollgate_central_ingest_fork_evidence_total{outcome="over_limit"} 2`,
		`tollgate_central_ingest_fork_evidence_total{outcome="failed"} 4`,
		`tollgate_central_ingest_refusals_total{reason="inconsistent"} 10`,
	)
}
