package central_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/ingest"
	"github.com/tollgate-dev/tollgate/central/service"
	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/central/verify"
)

// publishFork publishes a head of size leaves of another view of tr's
// tree (the same tenant, appliance and day), which the plane must refuse
// as inconsistent, and returns it.
func publishFork(t *testing.T, p *centraltest.Plane, tr *centraltest.Tree, size int) head.Head {
	t.Helper()
	fork := centraltest.NewTree(tr.Tenant, tr.App)
	fork.Day = tr.Day
	fork.Add(size)
	h := fork.Head(t, time.Now())
	_, err := service.Publish(context.Background(), p.IngestClient(t, tr.App), ingest.Upload{Head: h, FirstLeafIndex: h.EventCount, LeafRetentionDays: 90})
	if reason, _, _ := service.RefusalOf(err); reason != ingest.ReasonInconsistent {
		t.Fatalf("a fork of %d leaves of %s: %v, want inconsistent", size, tr.Tenant, err)
	}
	return h
}

// forkJSON is a fork as the API lays it out.
func forkJSON(f store.Fork) string {
	return fmt.Sprintf(`{"number":%d,"tenant_id":%q,"appliance_id":%q,"day":%q,"received_at":%q,"signed_head":%s,"stored_head":%s,"stored_root":%q,"stored_root_from_nodes":%t}`,
		f.Number, f.Head.TenantID, f.Head.ApplianceID, f.Head.Day, head.FormatSignedAt(f.ReceivedAt),
		headJSON(f.Head), headJSON(f.Stored), f.StoredRoot, f.FromNodes)
}

// forksBody is a forks document: data, and next_from when set.
func forksBody(next int, forks ...store.Fork) string {
	parts := make([]string, len(forks))
	for i, f := range forks {
		parts[i] = forkJSON(f)
	}
	out := `{"data":[` + strings.Join(parts, ",") + `]`
	if next >= 0 {
		out += `,"next_from":` + strconv.Itoa(next)
	}
	return out + `}`
}

// TestForksOverREST: heads the plane refused as forks are kept, and the
// tenant's auditors read them at /v1/tenants/{tenant}/audit/forks with
// the tenant's audit token, the refused head and the stored head it
// contradicts in full, each verifying with the fleet CA; the same fork
// sent again is listed once. Another tenant's token is refused, as on the
// heads list, and reads none of them on its own path.
func TestForksOverREST(t *testing.T) {
	w := newWorld(t)
	p := w.plane
	// Of the stored size, another root; smaller, against the stored
	// nodes; on the other appliance's tree.
	same := publishFork(t, p, w.acme1, 5)
	smaller := publishFork(t, p, w.acme1, 2)
	publishFork(t, p, w.acme1, 5) // another head: signed_at differs
	other := publishFork(t, p, w.acme2, 3)
	_, err := service.Publish(context.Background(), p.IngestClient(t, w.acme1.App), ingest.Upload{Head: same, FirstLeafIndex: 5, LeafRetentionDays: 90})
	if reason, _, _ := service.RefusalOf(err); reason != ingest.ReasonInconsistent {
		t.Fatalf("the fork sent again: %v", err)
	}
	stored, err := p.Store.Forks(context.Background(), "acme", store.ForkQuery{})
	if err != nil || len(stored) != 4 {
		t.Fatalf("stored forks: %d, %v; want 4", len(stored), err)
	}
	latest1, _ := p.Store.Tree(context.Background(), storeTree(w.acme1))
	for i, want := range []struct {
		signed, stored head.Head
		fromNodes      bool
	}{{same, latest1.Head, false}, {smaller, latest1.Head, true}} {
		if f := stored[i]; f.Head != want.signed || f.Stored != want.stored || f.FromNodes != want.fromNodes {
			t.Fatalf("fork %d: %+v", i, f)
		}
	}
	if stored[3].Head != other {
		t.Fatalf("fork 3 is not the other appliance's: %+v", stored[3])
	}

	st, hdr, body := get(t, w, "/v1/tenants/acme/audit/forks", acmeToken)
	if st != http.StatusOK || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("forks: %d %s %s", st, hdr.Get("Content-Type"), body)
	}
	if want := forksBody(-1, stored...); string(body) != want {
		t.Fatalf("forks body\n got %s\nwant %s", body, want)
	}
	if !json.Valid(body) {
		t.Fatalf("forks body is not JSON: %s", body)
	}
	for i, f := range stored {
		// The evidence verifies offline, as a served head does.
		for _, h := range []head.Head{f.Head, f.Stored} {
			if err := verify.Head(h, p.Fleet.CA.Cert); err != nil {
				t.Fatalf("fork %d: %v", i, err)
			}
		}
	}

	for _, c := range []struct {
		query string
		want  string
	}{
		{"?appliance_id=" + w.acme2.App.ID, forksBody(-1, stored[3])},
		{"?appliance_id=" + w.acme1.App.ID + "&day=" + w.acme1.Day, forksBody(-1, stored[:3]...)},
		{"?day=2020-01-01", `{"data":[]}`},
		{"?page_size=2", forksBody(2, stored[:2]...)},
		{"?page_size=2&from=2", forksBody(-1, stored[2:]...)},
		{"?page_size=1&from=1&appliance_id=" + w.acme1.App.ID, forksBody(2, stored[1])},
		{"?page_size=1&from=3&appliance_id=" + w.acme1.App.ID, `{"data":[]}`},
		{"?from=4", `{"data":[]}`},
	} {
		if st, _, body := get(t, w, "/v1/tenants/acme/audit/forks"+c.query, acmeToken); st != http.StatusOK || string(body) != c.want {
			t.Fatalf("forks%s: %d\n got %s\nwant %s", c.query, st, body, c.want)
		}
	}

	// Another tenant's token: refused on acme's path; its own path holds
	// none of acme's forks.
	for _, c := range []struct {
		path, token string
		status      int
		code        string
	}{
		{"/v1/tenants/acme/audit/forks", globexToken, http.StatusForbidden, "forbidden"},
		{"/v1/tenants/acme/audit/forks?appliance_id=bogus", globexToken, http.StatusForbidden, "forbidden"},
		{"/v1/tenants/acme/audit/forks", "", http.StatusUnauthorized, "unauthorized"},
		{"/v1/tenants/acme/audit/forks", "tga_not_a_known_token", http.StatusUnauthorized, "unauthorized"},
		{"/v1/tenants/acme/audit/forks?appliance_id=bogus", acmeToken, http.StatusBadRequest, "invalid_request"},
		{"/v1/tenants/acme/audit/forks?day=2026-02-30", acmeToken, http.StatusBadRequest, "invalid_request"},
		{"/v1/tenants/acme/audit/forks?page_size=1001", acmeToken, http.StatusBadRequest, "invalid_request"},
		{"/v1/tenants/acme/audit/forks?from=1&from=2", acmeToken, http.StatusBadRequest, "invalid_request"},
		{"/v1/tenants/acme/audit/forks?from=-1", acmeToken, http.StatusBadRequest, "invalid_request"},
	} {
		st, _, body := get(t, w, c.path, c.token)
		var env struct{ Error struct{ Code string } }
		if st != c.status || json.Unmarshal(body, &env) != nil || env.Error.Code != c.code {
			t.Fatalf("GET %s with %q: %d %s, want %d %s", c.path, c.token, st, body, c.status, c.code)
		}
	}
	if st, _, body := get(t, w, "/v1/tenants/globex/audit/forks", globexToken); st != http.StatusOK || string(body) != `{"data":[]}` {
		t.Fatalf("globex's forks: %d %s", st, body)
	}
}
