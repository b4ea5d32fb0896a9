package central_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central"
	"github.com/tollgate-dev/tollgate/central/centralclient"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/ingest"
	"github.com/tollgate-dev/tollgate/central/service"
	"github.com/tollgate-dev/tollgate/central/tlsconf"
	"github.com/tollgate-dev/tollgate/central/verify"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
	"github.com/tollgate-dev/tollgate/internal/webtest"
)

const (
	acmeToken   = "tga_test_acme_reader"
	globexToken = "tga_test_globex_reader"
)

// world is a plane with three published trees.
type world struct {
	plane             *centraltest.Plane
	acme1, acme2, gx1 *centraltest.Tree
	first             ingest.Upload // acme1's first upload
}

func newWorld(t *testing.T) *world {
	t.Helper()
	p := centraltest.StartPlane(t)
	ctx := context.Background()
	for tenant, tok := range map[string]string{"acme": acmeToken, "globex": globexToken} {
		if err := p.Tokens.SetAuditTokens(ctx, tenant, []string{tok}); err != nil {
			t.Fatal(err)
		}
	}
	one, two := p.Fleet.Appliance(t, "app_one"), p.Fleet.Appliance(t, "app_two")
	w := &world{plane: p, acme1: centraltest.NewTree("acme", one), acme2: centraltest.NewTree("acme", two), gx1: centraltest.NewTree("globex", one)}
	for tr, n := range map[*centraltest.Tree]int{w.acme1: 5, w.acme2: 3, w.gx1: 2} {
		tr.Add(n)
		u := tr.Upload(t, 0)
		if tr == w.acme1 {
			w.first = u
		}
		res, err := centraltest.Publish(ctx, p.IngestClient(t, tr.App), u)
		if err != nil || res.GetEventCount() != uint32(n) || res.GetDuplicate() {
			t.Fatalf("publish %s: %v, %v", tr.Tenant, res, err)
		}
	}
	return w
}

func TestPlane(t *testing.T) {
	w := newWorld(t)
	t.Run("ingest", func(t *testing.T) { testIngest(t, w) })
	t.Run("heads", func(t *testing.T) { testHeads(t, w) })
	t.Run("proof", func(t *testing.T) { testProof(t, w) })
	t.Run("errors", func(t *testing.T) { testErrors(t, w) })
	t.Run("openapi", func(t *testing.T) { testOpenAPI(t, w) })
	t.Run("grpc client", func(t *testing.T) { testGRPCClient(t, w) })
}

func testIngest(t *testing.T, w *world) {
	ctx := context.Background()
	p := w.plane
	// A resend is a success that changes nothing.
	res, err := centraltest.Publish(ctx, p.IngestClient(t, w.acme1.App), w.first)
	if err != nil || !res.GetDuplicate() {
		t.Fatalf("resend: %v, %v", res, err)
	}
	// app_two may not publish app_one's heads.
	_, err = centraltest.Publish(ctx, p.IngestClient(t, w.acme2.App), w.acme1.Upload(t, 0))
	if reason, _, _ := centralclient.RefusalOf(err); status.Code(err) != codes.PermissionDenied || reason != "appliance_mismatch" {
		t.Fatalf("another appliance's head: %v", err)
	}
	// A certificate of another fleet does not get through TLS.
	stranger := centraltest.NewFleet(t).Appliance(t, "app_one")
	if _, err = centraltest.Publish(ctx, p.IngestClient(t, stranger), w.acme1.Upload(t, 0)); status.Code(err) != codes.Unavailable {
		t.Fatalf("a stranger's certificate: %v", err)
	}
	// Nor does a client without a certificate.
	roots, err := tlsconf.Pool(p.ServerCertPEM)
	if err != nil {
		t.Fatal(err)
	}
	anon, err := grpc.NewClient(p.Addrs.Ingest, grpc.WithTransportCredentials(credentials.NewTLS(
		&tls.Config{MinVersion: tls.VersionTLS13, RootCAs: roots, ServerName: "127.0.0.1"})))
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	if _, err = centraltest.Publish(ctx, centralv1.NewCentralAuditServiceClient(anon), w.acme1.Upload(t, 0)); status.Code(err) != codes.Unavailable {
		t.Fatalf("no client certificate: %v", err)
	}
	// A gap is refused with what is stored, so the appliance can resend.
	w.acme1.Add(2)
	_, err = centraltest.Publish(ctx, p.IngestClient(t, w.acme1.App), w.acme1.Upload(t, 6))
	if reason, stored, _ := centralclient.RefusalOf(err); status.Code(err) != codes.FailedPrecondition || reason != "leaf_gap" || stored != 5 {
		t.Fatalf("gap: %v (stored %d)", err, stored)
	}
	if res, err = centraltest.Publish(ctx, p.IngestClient(t, w.acme1.App), w.acme1.Upload(t, 5)); err != nil || res.GetEventCount() != 7 {
		t.Fatalf("the missing leaves: %v, %v", res, err)
	}
	// Protovalidate runs on the ingest server: a malformed leaf hash.
	w.acme1.Add(1)
	u := w.acme1.Upload(t, 7)
	u.Leaves[0].LeafHash = u.Leaves[0].LeafHash[:31]
	if _, err = centraltest.Publish(ctx, p.IngestClient(t, w.acme1.App), u); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("short leaf hash: %v", err)
	}
}

// get does a REST GET with an optional audit token.
func get(t *testing.T, w *world, path, token string) (int, http.Header, []byte) {
	t.Helper()
	return webtest.Get(t, w.plane.BaseURL+path, token)
}

// headJSON is a head as the spec lays it out, in the served order.
func headJSON(h head.Head) string {
	b, _ := json.Marshal(h) // head.Head's fields are in the served order
	return string(b)
}

func testHeads(t *testing.T, w *world) {
	st, hdr, body := get(t, w, "/v1/tenants/acme/audit/heads?day="+w.acme1.Day, acmeToken)
	if st != http.StatusOK || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("heads: %d %s %s", st, hdr.Get("Content-Type"), body)
	}
	for name := range hdr {
		if strings.HasPrefix(name, "Grpc-") {
			t.Fatalf("internal gRPC metadata in the response: %s: %s", name, hdr.Get(name))
		}
	}
	h1, err := w.plane.Store.Tree(context.Background(), storeTree(w.acme1))
	if err != nil {
		t.Fatal(err)
	}
	h2, _ := w.plane.Store.Tree(context.Background(), storeTree(w.acme2))
	want := `{"data":[` + headJSON(h1.Head) + `,` + headJSON(h2.Head) + `]}`
	if string(body) != want {
		t.Fatalf("heads body\n got %s\nwant %s", body, want)
	}
	heads, err := verify.ParseHeads(body)
	if err != nil || len(heads) != 2 {
		t.Fatalf("strict parse: %v", err)
	}
	for _, h := range heads {
		if err := verify.Head(h, w.plane.Fleet.CA.Cert); err != nil {
			t.Fatal(err)
		}
	}
	// Another day: an empty list.
	if st, _, body = get(t, w, "/v1/tenants/acme/audit/heads?day=2020-01-01", acmeToken); st != 200 || string(body) != `{"data":[]}` {
		t.Fatalf("empty day: %d %s", st, body)
	}
}

func testProof(t *testing.T, w *world) {
	l := w.acme1.Leaves[3]
	st, _, body := get(t, w, fmt.Sprintf("/v1/tenants/acme/audit/proof?appliance_id=%s&day=%s&request_id=%s", w.acme1.App.ID, w.acme1.Day, l.RequestID), acmeToken)
	if st != http.StatusOK {
		t.Fatalf("proof: %d %s", st, body)
	}
	var generic map[string]any
	if err := json.Unmarshal(body, &generic); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"sequence", "leaf_index", "tree_size"} {
		if _, ok := generic[k].(float64); !ok {
			t.Fatalf("%s is not a JSON number in %s", k, body)
		}
	}
	if !regexp.MustCompile(`^\{"appliance_id":"app_one","day":"[0-9-]{10}","request_id":"req_[a-z0-9]+","sequence":8,"leaf_index":3,"tree_size":7,"leaf_hash":"[0-9a-f]{64}","audit_path":\["[0-9a-f]{64}"(,"[0-9a-f]{64}")*\],"head":\{"tenant_id":"acme",.*\},"leaf":"\{\\"appliance_id\\":\\"app_one\\",.*\}"\}$`).Match(body) {
		t.Fatalf("proof layout: %s", body)
	}
	p, err := verify.ParseProof(body)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.Proof(p, w.plane.Fleet.CA.Cert); err != nil {
		t.Fatal(err)
	}
	// The leaf is the appliance's canonical leaf, byte for byte, and binds
	// the proof's request_id and sequence.
	if string(p.Leaf) != string(w.acme1.Canonical[3]) {
		t.Fatalf("the proof's leaf %s, want %s", p.Leaf, w.acme1.Canonical[3])
	}
	if err := verify.BindLeaf(p, nil); err != nil {
		t.Fatal(err)
	}
}

func testErrors(t *testing.T, w *world) {
	day := w.acme1.Day
	proof := func(app, d, req string) string {
		return fmt.Sprintf("/v1/tenants/acme/audit/proof?appliance_id=%s&day=%s&request_id=%s", app, d, req)
	}
	known := w.acme1.Leaves[0].RequestID
	for _, c := range []struct {
		name, path, token string
		status            int
		code              string
	}{
		{"no token", "/v1/tenants/acme/audit/heads?day=" + day, "", 401, "unauthorized"},
		{"no token, malformed day", "/v1/tenants/acme/audit/heads?day=x", "", 401, "unauthorized"},
		{"unknown token", "/v1/tenants/acme/audit/heads?day=" + day, "tga_nobody_knows_me", 401, "unauthorized"},
		{"another tenant's token", "/v1/tenants/acme/audit/heads?day=" + day, globexToken, 403, "forbidden"},
		{"another tenant's token, proof", proof("app_one", day, known), globexToken, 403, "forbidden"},
		{"token of a tenant that does not exist", "/v1/tenants/nosuch/audit/heads?day=" + day, acmeToken, 403, "forbidden"},
		{"missing day", "/v1/tenants/acme/audit/heads", acmeToken, 400, "invalid_request"},
		{"malformed day", "/v1/tenants/acme/audit/heads?day=2026-1-01", acmeToken, 400, "invalid_request"},
		{"impossible day", "/v1/tenants/acme/audit/heads?day=2026-02-30", acmeToken, 400, "invalid_request"},
		{"malformed tenant", "/v1/tenants/ACME/audit/heads?day=" + day, acmeToken, 403, "forbidden"},
		{"another tenant's token, missing day", "/v1/tenants/acme/audit/heads", globexToken, 403, "forbidden"},
		{"another tenant's token, malformed day", "/v1/tenants/acme/audit/heads?day=2026-1-01", globexToken, 403, "forbidden"},
		{"another tenant's token, malformed proof", proof("one", "yesterday", "req-1"), globexToken, 403, "forbidden"},
		{"token of a tenant that does not exist, missing day", "/v1/tenants/nosuch/audit/heads", acmeToken, 403, "forbidden"},
		{"malformed tenant, missing day", "/v1/tenants/ACME/audit/heads", acmeToken, 403, "forbidden"},
		{"malformed appliance id", proof("one", day, known), acmeToken, 400, "invalid_request"},
		{"malformed request id", proof("app_one", day, "req-1"), acmeToken, 400, "invalid_request"},
		{"malformed proof day", proof("app_one", "yesterday", known), acmeToken, 400, "invalid_request"},
		{"unknown request id", proof("app_one", day, "req_unknown"), acmeToken, 404, "request_not_found"},
		{"request of another tree", proof("app_two", day, known), acmeToken, 404, "request_not_found"},
		{"no such route", "/v1/tenants/acme/audit/nothing", acmeToken, 404, "not_found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, hdr, body := get(t, w, c.path, c.token)
			var env envelopeOf
			dec := json.NewDecoder(bytes.NewReader(body))
			if err := dec.Decode(&env); err != nil || st != c.status || env.Error.Code != c.code {
				t.Fatalf("got %d %s, want %d %s", st, body, c.status, c.code)
			}
			if !strings.HasPrefix(string(body), `{"error":{"code":`) || env.Error.Message == "" || env.Error.Type == "" ||
				env.Error.RequestID != hdr.Get("X-Request-Id") || !regexp.MustCompile(`^req_[a-z0-9]{26}$`).MatchString(env.Error.RequestID) {
				t.Fatalf("envelope %s (header %s)", body, hdr.Get("X-Request-Id"))
			}
		})
	}
	// Headers beyond central.MaxHeaderBytes are refused before any handler.
	big, _ := http.NewRequest(http.MethodGet, w.plane.BaseURL+"/v1/tenants/acme/audit/heads?day="+day, nil)
	big.Header.Set("Authorization", "Bearer "+acmeToken)
	big.Header.Set("X-Padding", strings.Repeat("x", central.MaxHeaderBytes+8192))
	if resp, err := http.DefaultClient.Do(big); err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("oversized headers: %v, %v", resp, err)
	} else {
		resp.Body.Close()
	}
	req, _ := http.NewRequest(http.MethodPost, w.plane.BaseURL+"/v1/tenants/acme/audit/heads?day="+day, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || !strings.HasPrefix(string(body), `{"error":{"code":"method_not_allowed",`) {
		t.Fatalf("POST: %d %s", resp.StatusCode, body)
	}
}

func testOpenAPI(t *testing.T, w *world) {
	st, hdr, body := get(t, w, "/v1/openapi.json", "")
	if st != 200 || hdr.Get("Content-Type") != "application/json" || !bytes.Equal(body, centralv1.OpenAPI) {
		t.Fatalf("openapi: %d %s", st, hdr.Get("Content-Type"))
	}
}

func testGRPCClient(t *testing.T, w *world) {
	ctx := context.Background()
	c := w.plane.QueryClient(t, acmeToken)
	list, err := c.ListHeads(ctx, &centralv1.ListHeadsRequest{TenantId: "acme", Day: w.acme1.Day})
	if err != nil || len(list.GetData()) != 2 {
		t.Fatalf("ListHeads: %v, %v", list, err)
	}
	for _, m := range list.GetData() {
		if err := head.Verify(service.HeadFromProto(m), w.plane.Fleet.CA.Cert); err != nil {
			t.Fatal(err)
		}
	}
	p, err := c.GetProof(ctx, &centralv1.GetProofRequest{TenantId: "acme", ApplianceId: "app_two", Day: w.acme2.Day, RequestId: w.acme2.Leaves[2].RequestID})
	if err != nil || p.GetLeafIndex() != 2 || p.GetTreeSize() != 3 {
		t.Fatalf("GetProof: %v, %v", p, err)
	}
	if _, err := w.plane.QueryClient(t, "").ListHeads(ctx, &centralv1.ListHeadsRequest{TenantId: "acme", Day: w.acme1.Day}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no token: %v", err)
	}
	if _, err := c.ListHeads(ctx, &centralv1.ListHeadsRequest{TenantId: "acme", Day: "x"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad day: %v", err)
	}
}
