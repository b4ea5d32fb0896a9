package edge_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
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
