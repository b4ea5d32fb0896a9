package central_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/central/service"
	"github.com/tollgate-dev/tollgate/central/store"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
	"github.com/tollgate-dev/tollgate/internal/webtest"
)

// headsPage is a heads document with the members it may hold, and
// whether next_page_token was present at all (it must be absent, not
// empty, on the last page).
type headsPage struct {
	Data          []head.Head
	NextPageToken string
	HasNext       bool
}

func parsePage(t *testing.T, body []byte) headsPage {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatalf("heads page: %v: %.300s", err, body)
	}
	var p headsPage
	if err := json.Unmarshal(raw["data"], &p.Data); err != nil {
		t.Fatalf("heads page data: %v: %.300s", err, body)
	}
	for name := range raw {
		if name != "data" && name != "next_page_token" {
			t.Errorf("heads page: unexpected member %q", name)
		}
	}
	if tok, ok := raw["next_page_token"]; ok {
		p.HasNext = true
		if err := json.Unmarshal(tok, &p.NextPageToken); err != nil || p.NextPageToken == "" {
			t.Fatalf("heads page: next_page_token %s is not a non-empty string", tok)
		}
	}
	return p
}

// commitHeads stores the heads of apps (one tree each, no leaves) for
// tenant acme on day, each with a certificate of certLen bytes; a store
// does not verify what it is given.
func commitHeads(t *testing.T, st store.Store, day string, apps []string, certLen int) {
	t.Helper()
	cert := strings.Repeat("c", certLen)
	for _, app := range apps {
		h := head.Head{TenantID: "acme", ApplianceID: app, Day: day, MerkleRoot: head.EmptyRoot(), Signature: "sig",
			SignedAt: day + "T12:00:00Z", Certificate: cert}
		if err := st.Commit(context.Background(), store.Commit{Head: h, LeafRetentionDays: 1}); err != nil {
			t.Fatal(err)
		}
	}
}

// listAll pages through the heads of acme on day with query (page_size,
// …) and returns the appliance ids in the order served, and the pages.
func listAll(t *testing.T, base, day, query string) ([]string, []headsPage) {
	t.Helper()
	var (
		ids   []string
		pages []headsPage
		token string
	)
	for {
		q := "/v1/tenants/acme/audit/heads?day=" + day + query
		if token != "" {
			q += "&page_token=" + url.QueryEscape(token)
		}
		st, _, body := webtest.Get(t, base+q, acmeToken)
		if st != http.StatusOK {
			t.Fatalf("GET %s: %d %.300s", q, st, body)
		}
		p := parsePage(t, body)
		pages = append(pages, p)
		for _, h := range p.Data {
			ids = append(ids, h.ApplianceID)
		}
		if !p.HasNext {
			return ids, pages
		}
		if len(pages) > 1000 {
			t.Fatal("paging does not end")
		}
		token = p.NextPageToken
	}
}

// TestHeadsPaging: with page_size, the heads list is served in pages of
// at most page_size heads, in appliance id order, each head exactly once,
// next_page_token present on every page but the last; without page_size
// it is the whole list as before, with no next_page_token.
func TestHeadsPaging(t *testing.T) {
	p := centraltest.StartPlane(t)
	if err := p.Tokens.SetAuditTokens(context.Background(), "acme", []string{acmeToken}); err != nil {
		t.Fatal(err)
	}
	const day = "2026-03-01"
	// Ids whose byte order differs from a locale's: case, '-' and '_'.
	apps := []string{"app_-x", "app_0", "app_9", "app_A", "app_Z", "app__", "app_a", "app_a-", "app_a_", "app_b", "app_z"}
	commitHeads(t, p.Store, day, apps, 100)
	commitHeads(t, p.Store, "2026-03-02", []string{"app_1", "app_c"}, 100) // another day: never listed

	ids, pages := listAll(t, p.BaseURL, day, "")
	if fmt.Sprint(ids) != fmt.Sprint(apps) || len(pages) != 1 {
		t.Fatalf("without page_size: %v in %d pages; want %v in one", ids, len(pages), apps)
	}
	for _, k := range []int{1, 2, 3, 5, 10, 11, 12, 1000} {
		ids, pages := listAll(t, p.BaseURL, day, fmt.Sprintf("&page_size=%d", k))
		if fmt.Sprint(ids) != fmt.Sprint(apps) {
			t.Errorf("page_size=%d: %v; want %v", k, ids, apps)
		}
		if want := (len(apps) + k - 1) / k; len(pages) != want {
			t.Errorf("page_size=%d: %d pages, want %d", k, len(pages), want)
		}
		for i, pg := range pages {
			if len(pg.Data) > k || (i < len(pages)-1 && len(pg.Data) != k) {
				t.Errorf("page_size=%d: page %d holds %d heads", k, i, len(pg.Data))
			}
		}
	}
	// A day without heads: one empty page, no token.
	if ids, pages := listAll(t, p.BaseURL, "2026-03-03", "&page_size=2"); len(ids) != 0 || len(pages) != 1 {
		t.Errorf("empty day: %v in %d pages", ids, len(pages))
	}

	// The gRPC API pages the same way.
	client := p.QueryClient(t, acmeToken)
	var got []string
	req := &centralv1.ListHeadsRequest{TenantId: "acme", Day: day, PageSize: ptr(int32(4))}
	for {
		res, err := client.ListHeads(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range res.GetData() {
			got = append(got, h.GetApplianceId())
		}
		if res.NextPageToken == nil {
			break
		}
		req.PageToken = res.NextPageToken
	}
	if fmt.Sprint(got) != fmt.Sprint(apps) {
		t.Errorf("gRPC pages: %v; want %v", got, apps)
	}
}

func ptr[T any](v T) *T { return &v }

// TestHeadsPagingParameters: a page_size out of 1–1000, not an integer,
// or a page_token this API did not hand out is 400 invalid_request
// naming the parameter, in words, beside the request's other problems.
func TestHeadsPagingParameters(t *testing.T) {
	w := newWorld(t)
	day := w.acme1.Day
	bad := base64.RawURLEncoding.EncodeToString([]byte("not an appliance"))
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"day=" + day + "&page_size=0", []string{"page_size must be an integer from 1 to 1000"}},
		{"day=" + day + "&page_size=-3", []string{"page_size must be an integer from 1 to 1000"}},
		{"day=" + day + "&page_size=1001", []string{"page_size must be an integer from 1 to 1000"}},
		{"day=" + day + "&page_size=ten", []string{"page_size must be an integer from 1 to 1000"}},
		{"day=" + day + "&page_size=", []string{"page_size must be an integer from 1 to 1000"}},
		{"day=" + day + "&page_size=4294967297", []string{"page_size must be an integer from 1 to 1000"}},
		{"day=" + day + "&page_size=1.5", []string{"page_size must be an integer from 1 to 1000"}},
		{"day=" + day + "&page_size=2&page_size=3", []string{"page_size must be an integer from 1 to 1000"}},
		{"day=" + day + "&pageSize=x", []string{"page_size must be an integer from 1 to 1000"}},
		{"page_size=0", []string{"day is required (YYYY-MM-DD)", "page_size must be an integer from 1 to 1000"}},
		{"day=" + day + "&page_size=2&page_token=%2B%2F%3D", []string{"page_token must be the next_page_token of a previous page"}},
		{"day=" + day + "&page_size=2&page_token=" + bad, []string{"page_token must be the next_page_token of a previous page"}},
		{"day=" + day + "&page_size=2&page_token=" + strings.Repeat("A", 200), []string{"page_token must be the next_page_token of a previous page"}},
		{"day=" + day + "&page_token=YXBwX29uZQ", []string{"page_token needs page_size"}},
	} {
		path := "/v1/tenants/acme/audit/heads?" + c.query
		st, _, body := send(t, w.plane.BaseURL, path, map[string][]string{"Authorization": {"Bearer " + acmeToken}})
		msg := wantError(t, path, st, body, http.StatusBadRequest, "invalid_request")
		for _, s := range c.want {
			if !strings.Contains(msg, s) {
				t.Errorf("%s: message %q does not say %q", path, msg, s)
			}
		}
		for _, no := range []string{"regex", "pattern", "^", "$", "strconv", "parsing", "validation error", "\n"} {
			if strings.Contains(msg, no) {
				t.Errorf("%s: message %q holds %q", path, msg, no)
			}
		}
	}
	// The token is checked before the parameters, as for day.
	st, _, body := send(t, w.plane.BaseURL, "/v1/tenants/acme/audit/heads?day="+day+"&page_size=ten", nil)
	wantError(t, "no token", st, body, http.StatusUnauthorized, "unauthorized")
}

// TestHeadsTooLargeWithoutPageSize: a heads list larger than a query
// response may be (central.MaxQueryResponse) was answered 500
// internal_error, the gateway's connection refusing the message. It is
// now 400 page_size_required telling the client to page; with page_size
// every head is served, pages shortened to fit the limit when page_size
// heads would not.
func TestHeadsTooLargeWithoutPageSize(t *testing.T) {
	if testing.Short() {
		t.Skip("stores and serves some 70 MiB of heads")
	}
	p := centraltest.StartPlane(t)
	if err := p.Tokens.SetAuditTokens(context.Background(), "acme", []string{acmeToken}); err != nil {
		t.Fatal(err)
	}
	const day = "2026-03-01"
	// Heads of 1 MiB (a store does not check the 16 KiB certificate bound
	// of ingest), so that few of them pass the limit.
	const certLen = 1 << 20
	n := central.MaxQueryResponse/certLen + 6
	apps := make([]string, n)
	for i := range apps {
		apps[i] = fmt.Sprintf("app_%03d", i)
	}
	commitHeads(t, p.Store, day, apps, certLen)

	st, _, body := webtest.Get(t, p.BaseURL+"/v1/tenants/acme/audit/heads?day="+day, acmeToken)
	msg := wantError(t, "without page_size", st, body, http.StatusBadRequest, "page_size_required")
	if !strings.Contains(msg, "page_size") {
		t.Errorf("message %q does not point to page_size", msg)
	}

	ids, pages := listAll(t, p.BaseURL, day, "&page_size=1000")
	if fmt.Sprint(ids) != fmt.Sprint(apps) {
		t.Fatalf("paged: %d heads, want %d", len(ids), len(apps))
	}
	if len(pages) != 2 {
		t.Errorf("paged: %d pages, want 2 (the first one shortened to the limit)", len(pages))
	}
}

// TestListLimitWithinGatewayLimit: the service's bound on a heads
// response is within what the gateway's connection accepts, so the
// gateway never refuses a response the service sends.
func TestListLimitWithinGatewayLimit(t *testing.T) {
	if service.DefaultMaxResponse > central.MaxQueryResponse {
		t.Fatalf("service.DefaultMaxResponse %d > central.MaxQueryResponse %d", service.DefaultMaxResponse, central.MaxQueryResponse)
	}
}
