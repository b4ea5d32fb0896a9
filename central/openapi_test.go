package central_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/webtest"
)

// TestOpenAPIDeclaresServedStatuses: every error status the REST API
// serves on an operation is a response of that operation in the OpenAPI
// document, so a generated client knows its body is the error envelope.
func TestOpenAPIDeclaresServedStatuses(t *testing.T) {
	w := newWorld(t)
	st, _, raw := webtest.Get(t, w.plane.BaseURL+"/v1/openapi.json", acmeToken)
	if st != http.StatusOK {
		t.Fatalf("openapi: %d", st)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Schema struct {
					Ref string `json:"$ref"`
				} `json:"schema"`
			} `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	served := map[string]int{}
	heads := "/v1/tenants/acme/audit/heads?day=" + w.acme1.Day
	if st, _, _ := webtest.Do(t, http.MethodPost, w.plane.BaseURL+heads, acmeToken); st != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", st)
	}
	served["405"] = http.StatusMethodNotAllowed
	// 503: the query service unreachable (docs/central.md).
	served["503"] = http.StatusServiceUnavailable
	for _, path := range []string{"/v1/tenants/{tenant_id}/audit/heads", "/v1/tenants/{tenant_id}/audit/proof", "/v1/tenants/{tenant_id}/audit/forks",
		"/v1/tenants/{tenant_id}/audit/history", "/v1/tenants/{tenant_id}/audit/consistency"} {
		op, ok := doc.Paths[path]["get"]
		if !ok {
			t.Fatalf("no GET %s in the document", path)
		}
		for code := range served {
			r, ok := op.Responses[code]
			if !ok || r.Schema.Ref != "#/definitions/v1ErrorEnvelope" {
				t.Errorf("GET %s: response %s not declared with the error envelope", path, code)
			}
		}
	}
}
