package edge_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// modelCard is the exact JSON of one model; created is when the engine
// loaded it.
func modelCard(id string, created int64) string {
	return fmt.Sprintf(`{"id":"%s","object":"model","created":%d,"owned_by":"tollgate"}`, id, created)
}

// loadedAt reads the engine's load time from a models list.
func loadedAt(t *testing.T, body []byte) int64 {
	t.Helper()
	var l struct {
		Data []struct {
			Created int64 `json:"created"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &l); err != nil || len(l.Data) == 0 || l.Data[0].Created <= 0 {
		t.Fatalf("models list %s (%v)", body, err)
	}
	return l.Data[0].Created
}

func TestListModels(t *testing.T) {
	s := newStack(t, stackConfig{})
	all := wantOK(t, s.do(t, http.MethodGet, "/v1/models", keyAll, ""))
	m := decodeMap(t, all)
	wantKeys(t, "list", m, "object", "data")
	for i, d := range m["data"].([]any) {
		wantKeys(t, fmt.Sprintf("data[%d]", i), d, "id", "object", "created", "owned_by")
	}
	created := loadedAt(t, all)
	for _, tc := range []struct{ key, want string }{
		{keyAll, `{"object":"list","data":[` + modelCard("builtin/echo", created) + `,` + modelCard("builtin/embed", created) + `]}`},
		{keyEcho, `{"object":"list","data":[` + modelCard("builtin/echo", created) + `]}`},
		{keyEmbed, `{"object":"list","data":[` + modelCard("builtin/embed", created) + `]}`},
		{keyNone, `{"object":"list","data":[]}`},
	} {
		t.Run(tc.key, func(t *testing.T) {
			if got := string(wantOK(t, s.do(t, http.MethodGet, "/v1/models", tc.key, ""))); got != tc.want {
				t.Errorf("list\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestGetModel(t *testing.T) {
	s := newStack(t, stackConfig{})
	created := loadedAt(t, wantOK(t, s.do(t, http.MethodGet, "/v1/models", keyAll, "")))

	// A front server that records the request line as received, to show
	// that the %2F reached the edge unnormalised.
	uris := make(chan string, 1)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uris <- r.RequestURI
		s.edge.ServeHTTP(w, r)
	}))
	defer front.Close()
	host := front.Listener.Addr().String()
	get := func(t *testing.T, rawPath, key string) response {
		req := &http.Request{
			Method: http.MethodGet,
			URL:    &url.URL{Scheme: "http", Host: host, Opaque: rawPath},
			Host:   host,
			Header: http.Header{"Authorization": {"Bearer " + key}},
		}
		r := s.send(t, req)
		if got := <-uris; got != rawPath {
			t.Fatalf("request line %q, want %q", got, rawPath)
		}
		return r
	}

	for _, tc := range []struct {
		name, path, key string
		want            string // exact body; "" means 404
	}{
		{"plain slash", "/v1/models/builtin/echo", keyAll, modelCard("builtin/echo", created)},
		{"escaped slash", "/v1/models/builtin%2Fecho", keyAll, modelCard("builtin/echo", created)},
		{"escaped slash, lower case", "/v1/models/builtin%2fembed", keyAll, modelCard("builtin/embed", created)},
		{"allowed model", "/v1/models/builtin%2Fecho", keyEcho, modelCard("builtin/echo", created)},
		{"disallowed model", "/v1/models/builtin/embed", keyEcho, ""},
		{"disallowed model, escaped", "/v1/models/builtin%2Fembed", keyEcho, ""},
		{"not loaded", "/v1/models/vllm/x", keyAll, ""},
		{"no namespace", "/v1/models/echo", keyAll, ""},
		{"empty id", "/v1/models/", keyAll, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := get(t, tc.path, tc.key)
			if tc.want == "" {
				wantError(t, r, http.StatusNotFound, "not_found", "invalid_request_error", "")
				return
			}
			if got := string(wantOK(t, r)); got != tc.want {
				t.Errorf("body\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// Model listing and lookup are gateway requests like any other: the policy
// decides on them (request.endpoint /v1/models, request.model the id
// looked up or empty for the list), a denial is 403 policy_denied with
// its decision id, and the audit event records the decision, allowed or
// not. A model the key may not use is still 404, before the policy.
func TestModelsAskThePolicy(t *testing.T) {
	pol := loadBundle(t, `package tollgate.gateway

decision := {"allow": false, "reason": "model listing is closed"} if {
	input.request.endpoint == "/v1/models"
	input.request.model == ""
} else := {"allow": false, "reason": "builtin/embed may not be looked up"} if {
	input.request.endpoint == "/v1/models"
	input.request.model == "builtin/embed"
} else := {"allow": true, "reason": "allowed"}
`)
	audit := newAuditRecorder()
	s := newStack(t, stackConfig{policy: pol, audit: audit})
	for _, tc := range []struct {
		name, path, key string
		status          int
		decided         bool // the event carries a decision id
	}{
		{"list", "/v1/models", keyAll, http.StatusForbidden, true},
		{"denied lookup", "/v1/models/builtin/embed", keyAll, http.StatusForbidden, true},
		{"denied lookup, escaped", "/v1/models/builtin%2Fembed", keyAll, http.StatusForbidden, true},
		{"allowed lookup", "/v1/models/builtin/echo", keyAll, http.StatusOK, true},
		{"allowed lookup of a model not loaded", "/v1/models/vllm/x", keyAll, http.StatusNotFound, true},
		{"model the key may not use", "/v1/models/builtin/embed", keyEcho, http.StatusNotFound, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.do(t, http.MethodGet, tc.path, tc.key, "")
			ev := audit.next(t)
			switch tc.status {
			case http.StatusForbidden:
				e := wantError(t, r, http.StatusForbidden, "policy_denied", "policy", "")
				if id, _ := e["policy_decision_id"].(string); !strings.HasPrefix(id, "dec_") || id != ev.PolicyDecisionID {
					t.Errorf("policy_decision_id %q, recorded %q", id, ev.PolicyDecisionID)
				}
			case http.StatusNotFound:
				wantError(t, r, http.StatusNotFound, "not_found", "invalid_request_error", "")
			default:
				wantOK(t, r)
			}
			if ev.Status != tc.status || ev.Endpoint != "/v1/models" || ev.RequestID != r.id() {
				t.Errorf("recorded %s %s status %d, want %s /v1/models %d", ev.RequestID, ev.Endpoint, ev.Status, r.id(), tc.status)
			}
			if decided := strings.HasPrefix(ev.PolicyDecisionID, "dec_"); decided != tc.decided {
				t.Errorf("recorded decision %q; want one: %t", ev.PolicyDecisionID, tc.decided)
			}
		})
	}
}
