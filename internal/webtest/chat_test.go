package webtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
)

func TestChat(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		id     string
		fails  bool
	}{
		{"ok", http.StatusOK, "req_1", false},
		{"refused", http.StatusForbidden, "req_2", true},
		{"no request id", http.StatusOK, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got struct {
				auth, path string
				body       map[string]any
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got.auth, got.path = r.Header.Get("Authorization"), r.URL.Path
				_ = json.NewDecoder(r.Body).Decode(&got.body)
				if tc.id != "" {
					w.Header().Set("X-Request-Id", tc.id)
				}
				w.WriteHeader(tc.status)
			}))
			defer srv.Close()
			var id string
			failed := runFails(func(tb testing.TB) { id = Chat(tb, srv.URL, "tgk_k", `say "hi"`) })
			if failed != tc.fails {
				t.Fatalf("failed = %v, want %v", failed, tc.fails)
			}
			if got.auth != "Bearer tgk_k" || got.path != "/v1/chat/completions" {
				t.Fatalf("sent %q to %q", got.auth, got.path)
			}
			msgs, _ := got.body["messages"].([]any)
			if len(msgs) != 1 || msgs[0].(map[string]any)["content"] != `say "hi"` || got.body["model"] != "builtin/echo" {
				t.Fatalf("body %v", got.body)
			}
			if !tc.fails && id != tc.id {
				t.Fatalf("request id %q, want %q", id, tc.id)
			}
		})
	}
}

// runFails runs f with a testing.TB that records failure instead of
// failing the test, and reports whether f failed.
func runFails(f func(testing.TB)) bool {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.failed
}

// recorder is a testing.TB whose Fatal stops the goroutine, as the real
// one does, and only records the failure.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper() {}

func (r *recorder) Fatal(args ...any) { r.failed = true; runtime.Goexit() }

func (r *recorder) Fatalf(format string, args ...any) { r.failed = true; runtime.Goexit() }
