package rest

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"

	"github.com/tollgate-dev/tollgate/central/auth"
	"github.com/tollgate-dev/tollgate/internal/lockedbuf"
	"github.com/tollgate-dev/tollgate/internal/webtest"
)

// TestUnknownRouteFailsClosed: a route the gate has no request message
// for used to be served with the token check but without the query
// checks. It is now refused as an internal error, logged with the
// route, and its handler is not called, with or without a query.
func TestUnknownRouteFailsClosed(t *testing.T) {
	tokens := auth.NewTokens()
	if err := tokens.SetAuditTokens(context.Background(), "acme", []string{"tga_the_token"}); err != nil {
		t.Fatal(err)
	}
	var logs lockedbuf.Buffer
	g := &gate{tokens: tokens}
	mux := runtime.NewServeMux(
		runtime.WithMiddlewares(g.middleware),
		runtime.WithMarshalerOption(runtime.MIMEWildcard, newMarshaler()),
		runtime.WithErrorHandler(errorHandler(slog.New(slog.NewTextHandler(&logs, nil)))),
	)
	g.mux = mux
	called := make(chan struct{}, 8)
	if err := mux.HandlePath(http.MethodGet, "/v1/tenants/{tenant_id}/audit/unlisted", func(w http.ResponseWriter, _ *http.Request, _ map[string]string) {
		called <- struct{}{}
		w.WriteHeader(http.StatusOK)
	}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(withRequestID(mux))
	t.Cleanup(srv.Close)

	for _, query := range []string{"", "?day=2026-11-23", "?day=2026-11-23&day=2026-11-24"} {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/tenants/acme/audit/unlisted"+query, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer tga_the_token")
		st, _, body := webtest.Send(t, req)
		if st != http.StatusInternalServerError || !strings.Contains(string(body), `"code":"internal_error"`) {
			t.Errorf("query %q: %d %s, want 500 internal_error", query, st, body)
		}
	}
	if len(called) > 0 {
		t.Errorf("the unlisted route's handler was called %d times", len(called))
	}
	if n := strings.Count(logs.String(), "/v1/tenants/{tenant_id=*}/audit/unlisted"); n != 3 {
		t.Errorf("%d log lines name the route, want 3:\n%s", n, logs.String())
	}
}
