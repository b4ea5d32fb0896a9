package central_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/central"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/central/store/pgstore"
	"github.com/tollgate-dev/tollgate/central/verify"
	"github.com/tollgate-dev/tollgate/internal/pgtest"
)

// TestRetention runs the plane's retention job on an injected clock, on
// both stores: a tree's leaves are kept as long as its heads, whatever
// the appliance's body retention, so the proof of an event whose bodies
// are gone is still served, and verifies, leaf and all; the whole tree
// goes exactly 10 years after its day, not a second sooner.
func TestRetention(t *testing.T) {
	for _, c := range []struct {
		name string
		open func(t *testing.T) store.Store
	}{
		{"bolt", nil},
		{"postgres", func(t *testing.T) store.Store {
			st, err := pgstore.Open(context.Background(), pgtest.DSN(), pgstore.Options{Schema: pgtest.Schema(t, "central_test"), MaxConns: 4})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var configure func(*central.Config)
			if c.open != nil {
				st := c.open(t)
				configure = func(cfg *central.Config) { cfg.Store = st }
			}
			testRetention(t, configure)
		})
	}
}

func testRetention(t *testing.T, configure func(*central.Config)) {
	p, prune := startPrunedPlane(t, configure)
	ctx := context.Background()
	if err := p.Tokens.SetAuditTokens(ctx, "acme", []string{acmeToken}); err != nil {
		t.Fatal(err)
	}
	tr := centraltest.NewTree("acme", p.Fleet.Appliance(t, "app_one"))
	tr.Add(3)
	u := tr.Upload(t, 0)
	u.LeafRetentionDays = 30 // the appliance keeps bodies 30 days
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
	expect := func(path string, status int, contains string) []byte {
		t.Helper()
		st, _, body := get(t, w, path, acmeToken)
		if st != status || !strings.Contains(string(body), contains) {
			t.Fatalf("GET %s: %d %s, want %d with %s", path, st, body, status, contains)
		}
		return body
	}
	proven := func() {
		t.Helper()
		body := expect(proofPath, http.StatusOK, `"leaf_index":1`)
		pr, err := verify.ProofDocument(body, p.Fleet.CA.Cert, nil)
		if err != nil || string(pr.Leaf) != string(tr.Canonical[1]) {
			t.Fatalf("the proof served: %v; its leaf %s, want %s", err, pr.Leaf, tr.Canonical[1])
		}
	}
	bodiesGone, _ := store.LeavesExpire(tr.Day, 30)
	headsExpire, _ := store.HeadsExpire(tr.Day)

	proven()
	pass(bodiesGone, store.Pruned{})
	proven()
	pass(headsExpire.Add(-time.Second), store.Pruned{})
	proven()
	expect(headsPath, http.StatusOK, `"event_count":3`)
	pass(headsExpire, store.Pruned{Trees: 1})
	expect(headsPath, http.StatusOK, `{"data":[]}`)
	expect(proofPath, http.StatusNotFound, `"code":"request_not_found"`)
}
