package central_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/centralclient"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/ingest"
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
	_, err := centraltest.Publish(context.Background(), p.IngestClient(t, tr.App), ingest.Upload{Head: h, FirstLeafIndex: h.EventCount, LeafRetentionDays: 90})
	if reason, _, _ := centralclient.RefusalOf(err); reason != ingest.ReasonInconsistent {
		t.Fatalf("a fork of %d leaves of %s: %v, want inconsistent", size, tr.Tenant, err)
	}
	return h
}

// forkJSON is a fork as the API lays it out.
func forkJSON(f store.Fork) string {
	hashes := make([]string, len(f.ConsistencyProof))
	for i, h := range f.ConsistencyProof {
		hashes[i] = strconv.Quote(hex.EncodeToString(h))
	}
	return fmt.Sprintf(`{"number":%d,"tenant_id":%q,"appliance_id":%q,"day":%q,"received_at":%q,"signed_head":%s,"stored_head":%s,"stored_root":%q,"stored_root_from_nodes":%t,"consistency_proof":[%s]}`,
		f.Number, f.Head.TenantID, f.Head.ApplianceID, f.Head.Day, head.FormatSignedAt(f.ReceivedAt),
		headJSON(f.Head), headJSON(f.Stored), f.StoredRoot, f.FromNodes, strings.Join(hashes, ","))
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
	_, err := centraltest.Publish(context.Background(), p.IngestClient(t, w.acme1.App), ingest.Upload{Head: same, FirstLeafIndex: 5, LeafRetentionDays: 90})
	if reason, _, _ := centralclient.RefusalOf(err); reason != ingest.ReasonInconsistent {
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

// TestForkVerifiesOffline: a served fork whose stored root was rebuilt
// from the plane's nodes proves the fork on its own, with the fleet CA
// and nothing the plane could later prune: both heads verify, the
// consistency proof shows that the signed stored head commits to
// stored_root at the refused head's size, and the refused head, signed
// too, has another root there. The record used to hold the stored root
// without a proof, which only the plane's nodes, deleted at leaf
// retention, could back.
func TestForkVerifiesOffline(t *testing.T) {
	w := newWorld(t)
	p := w.plane
	latest, err := p.Store.Tree(context.Background(), storeTree(w.acme1))
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{1, 2, 3, int(latest.Head.EventCount) - 1} {
		publishFork(t, p, w.acme1, size)
	}
	st, _, body := get(t, w, "/v1/tenants/acme/audit/forks", acmeToken)
	if st != http.StatusOK {
		t.Fatalf("forks: %d %s", st, body)
	}
	var doc struct {
		Data []struct {
			SignedHead          json.RawMessage `json:"signed_head"`
			StoredHead          json.RawMessage `json:"stored_head"`
			StoredRoot          string          `json:"stored_root"`
			StoredRootFromNodes bool            `json:"stored_root_from_nodes"`
			ConsistencyProof    []string        `json:"consistency_proof"`
		}
	}
	if err := json.Unmarshal(body, &doc); err != nil || len(doc.Data) != 4 {
		t.Fatalf("forks: %d, %v; want 4\n%s", len(doc.Data), err, body)
	}
	for i, f := range doc.Data {
		heads, err := verify.HeadsDocument([]byte(`{"data":[`+string(f.SignedHead)+`,`+string(f.StoredHead)+`]}`), p.Fleet.CA.Cert)
		if err != nil {
			t.Fatalf("fork %d: %v", i, err)
		}
		signed, stored := heads[0], heads[1]
		if !f.StoredRootFromNodes || signed.EventCount >= stored.EventCount {
			t.Fatalf("fork %d: %d events against the stored %d, from nodes %t; want a smaller head, from nodes",
				i, signed.EventCount, stored.EventCount, f.StoredRootFromNodes)
		}
		hashes := make([][]byte, len(f.ConsistencyProof))
		for j, h := range f.ConsistencyProof {
			if hashes[j], err = hex.DecodeString(h); err != nil || hex.EncodeToString(hashes[j]) != h {
				t.Fatalf("fork %d: consistency_proof[%d] %q is not lowercase hex", i, j, h)
			}
		}
		root, err := hex.DecodeString(f.StoredRoot)
		if err != nil {
			t.Fatal(err)
		}
		storedRoot, err := stored.Root()
		if err != nil {
			t.Fatal(err)
		}
		if err := proof.VerifyConsistency(rfc6962.DefaultHasher, signed.EventCount, stored.EventCount, hashes, root, storedRoot); err != nil {
			t.Fatalf("fork %d: stored_root at %d is not proven consistent with the stored head of %d: %v",
				i, signed.EventCount, stored.EventCount, err)
		}
		if f.StoredRoot == signed.MerkleRoot {
			t.Fatalf("fork %d: the refused head has the stored root", i)
		}
	}
}
