package central_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/internal/webtest"
)

// TestMethodNotAllowed: every route answers another method than GET with
// 405 method_not_allowed in the envelope and, as RFC 9110 requires of a
// 405, an Allow header naming the methods it serves; the OpenAPI document's
// route included.
func TestMethodNotAllowed(t *testing.T) {
	w := newWorld(t)
	for _, path := range []string{
		"/v1/tenants/acme/audit/heads?day=" + w.acme1.Day,
		"/v1/tenants/acme/audit/proof?appliance_id=app_one&day=" + w.acme1.Day + "&request_id=" + w.acme1.Leaves[0].RequestID,
		"/v1/openapi.json",
	} {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodOptions, http.MethodPatch} {
			st, hdr, body := webtest.Do(t, method, w.plane.BaseURL+path, acmeToken)
			if st != http.StatusMethodNotAllowed || !strings.HasPrefix(string(body), `{"error":{"code":"method_not_allowed",`) {
				t.Errorf("%s %s: %d %s", method, path, st, body)
			}
			if allow := hdr.Get("Allow"); !strings.Contains(allow, http.MethodGet) {
				t.Errorf("%s %s: 405 with Allow %q", method, path, allow)
			}
		}
	}
}

// TestHeadsOfManyAppliances: the heads list has one element per appliance
// and no paging, so it grows with the fleet; each head may carry a
// certificate of up to 16 KiB. A list of a few hundred such heads passed
// gRPC's default 4 MiB receive limit on the gateway's connection and was
// answered 500.
func TestHeadsOfManyAppliances(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	const apps = 300
	day := "2020-01-01"
	cert := strings.Repeat("c", 16384)
	for i := range apps {
		h := head.Head{TenantID: "acme", ApplianceID: fmt.Sprintf("app_%04d", i), Day: day, EventCount: 0,
			MerkleRoot: head.EmptyRoot(), Signature: "sig", SignedAt: day + "T12:00:00Z", Certificate: cert}
		if err := w.plane.Store.Commit(ctx, store.Commit{Head: h, LeafRetentionDays: 1}); err != nil {
			t.Fatal(err)
		}
	}
	st, _, body := webtest.Get(t, w.plane.BaseURL+"/v1/tenants/acme/audit/heads?day="+day, acmeToken)
	if st != http.StatusOK {
		t.Fatalf("heads of %d appliances: %d %.300s", apps, st, body)
	}
	var doc struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || len(doc.Data) != apps {
		t.Fatalf("heads of %d appliances: %d elements, %v", apps, len(doc.Data), err)
	}
}
