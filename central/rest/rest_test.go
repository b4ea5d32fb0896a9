package rest_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/tollgate-dev/tollgate/central/auth"
	"github.com/tollgate-dev/tollgate/central/rest"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
)

// recorder is an AuditQueryService that keeps what its last call
// received: the metadata and whether the call had a deadline.
type recorder struct {
	centralv1.UnimplementedAuditQueryServiceServer
	calls chan call
}

type call struct {
	md          metadata.MD
	hasDeadline bool
}

func (r *recorder) ListHeads(ctx context.Context, _ *centralv1.ListHeadsRequest) (*centralv1.ListHeadsResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	_, dl := ctx.Deadline()
	r.calls <- call{md: md, hasDeadline: dl}
	return &centralv1.ListHeadsResponse{}, nil
}

// TestOnlyTheTokenIsForwarded: of a REST request's headers, only
// Authorization reaches the query service, as the authorization
// metadata it authenticates with. Grpc-Timeout does not become the
// call's deadline, and Grpc-Metadata-*, X-Forwarded-* and the standard
// headers grpc-gateway forwards by default (Cookie, User-Agent, …) do
// not become metadata: a REST client cannot set what the gRPC side reads.
func TestOnlyTheTokenIsForwarded(t *testing.T) {
	rec := &recorder{calls: make(chan call, 1)}
	hs := serveREST(t, rec)

	const marker = "client-chosen"
	req, err := http.NewRequest(http.MethodGet, hs.URL+"/v1/tenants/acme/audit/heads?day=2026-11-23", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer tga_the_token")
	req.Header.Set("Grpc-Timeout", "1H")
	for _, name := range []string{"Grpc-Metadata-X-Request-Id", "Grpc-Metadata-Tenant", "Grpc-Metadata-Authorization",
		"X-Forwarded-For", "X-Forwarded-Host", "Cookie", "User-Agent", "Accept-Language", "From", "Via", "X-Request-Id"} {
		req.Header.Set(name, marker)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	got := <-rec.calls
	if got.hasDeadline {
		t.Error("the client's Grpc-Timeout became the call's deadline")
	}
	if a := got.md.Get("authorization"); len(a) != 1 || a[0] != "Bearer tga_the_token" {
		t.Errorf("authorization metadata %q", a)
	}
	if id := got.md.Get("x-request-id"); len(id) != 1 || id[0] != resp.Header.Get(rest.RequestIDHeader) {
		t.Errorf("x-request-id metadata %q, response header %q", id, resp.Header.Get(rest.RequestIDHeader))
	}
	for k, vals := range got.md {
		for _, v := range vals {
			if strings.Contains(v, marker) {
				t.Errorf("metadata %s: %q came from the client", k, v)
			}
		}
		if strings.HasPrefix(k, "grpcgateway-") {
			t.Errorf("metadata %s: a client header forwarded", k)
		}
	}
}

// serveREST serves the REST API in front of svc, a query service of the
// test's, over a real gRPC connection, with tga_the_token as tenant
// acme's audit token.
func serveREST(t *testing.T, svc centralv1.AuditQueryServiceServer) *httptest.Server {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	centralv1.RegisterAuditQueryServiceServer(srv, svc)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	tokens := auth.NewTokens()
	if err := tokens.SetAuditTokens(context.Background(), "acme", []string{"tga_the_token"}); err != nil {
		t.Fatal(err)
	}
	h, err := rest.Handler(context.Background(), conn, tokens, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs
}
