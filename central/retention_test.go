package central_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/store"
)

// TestRetention runs the plane's retention job on an injected clock: a
// tree's leaves go when the appliance's body retention has passed since
// its day ended (proofs then answer 410 proof_expired, the head is still
// listed), and its heads stay until exactly 10 years after the day, not a
// second less.
func TestRetention(t *testing.T) {
	p, prune := startPrunedPlane(t, nil)
	ctx := context.Background()
	if err := p.Tokens.SetAuditTokens(ctx, "acme", []string{acmeToken}); err != nil {
		t.Fatal(err)
	}
	tr := centraltest.NewTree("acme", p.Fleet.Appliance(t, "app_one"))
	tr.Add(3)
	u := tr.Upload(t, 0)
	u.LeafRetentionDays = 30
	if _, err := centraltest.Publish(ctx, p.IngestClient(t, tr.App), u); err != nil {
		t.Fatal(err)
	}
	headsPath := "/v1/tenants/acme/audit/heads?day=" + tr.Day
	proofPath := fmt.Sprintf("/v1/tenants/acme/audit/proof?appliance_id=%s&day=%s&request_id=%s", tr.App.ID, tr.Day, tr.Leaves[1].RequestID)
	w := &world{plane: p}
	pass := func(at time.Time, want store.Pruned) {
		t.Helper()
		if got := prune(at); got != want {
			t.Fatalf("pass at %s: %+v, want %+v", at, got, want)
		}
	}
	expect := func(path string, status int, contains string) {
		t.Helper()
		st, _, body := get(t, w, path, acmeToken)
		if st != status || !strings.Contains(string(body), contains) {
			t.Fatalf("GET %s: %d %s, want %d with %s", path, st, body, status, contains)
		}
	}
	leavesExpire, _ := store.LeavesExpire(tr.Day, 30)
	headsExpire, _ := store.HeadsExpire(tr.Day)

	pass(leavesExpire.Add(-time.Second), store.Pruned{})
	expect(proofPath, http.StatusOK, `"leaf_index":1`)
	pass(leavesExpire, store.Pruned{LeafTrees: 1})
	expect(proofPath, http.StatusGone, `"code":"proof_expired"`)
	expect(headsPath, http.StatusOK, `"event_count":3`)

	pass(headsExpire.Add(-time.Second), store.Pruned{})
	expect(headsPath, http.StatusOK, `"event_count":3`)
	if years := headsExpire.Sub(leavesExpire).Hours() / 24 / 365.25; years < 9.9 {
		t.Fatalf("heads kept %.1f years after the leaves", years)
	}
	pass(headsExpire, store.Pruned{Trees: 1})
	expect(headsPath, http.StatusOK, `{"data":[]}`)
	expect(proofPath, http.StatusNotFound, `"code":"request_not_found"`)
}
