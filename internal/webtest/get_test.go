package webtest

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestGet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen", r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write([]byte("body of " + r.URL.Path))
	}))
	defer srv.Close()
	for _, tc := range []struct{ token, seen string }{{"tok", "Bearer tok"}, {"", ""}} {
		code, h, body := Get(t, srv.URL+"/p", tc.token)
		if code != http.StatusTeapot || h.Get("X-Seen") != tc.seen || string(body) != "body of /p" {
			t.Errorf("token %q: %d, %q, %q", tc.token, code, h.Get("X-Seen"), body)
		}
	}
}
