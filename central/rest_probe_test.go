package central_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/central"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
	"github.com/tollgate-dev/tollgate/internal/lockedbuf"
	"github.com/tollgate-dev/tollgate/internal/webtest"
)

// Tests of requests a client sends outside the API's contract, as a
// black-box probe found them.

// envelopeOf is a REST error response as the spec lays it out.
type envelopeOf struct {
	Error struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Type      string `json:"type"`
		RequestID string `json:"request_id"`
	} `json:"error"`
}

// send does a GET of path with the headers given (each name with one or
// more values, in order) and returns the status, headers and body.
func send(t *testing.T, base, path string, hdr map[string][]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, vals := range hdr {
		for _, v := range vals {
			req.Header.Add(name, v)
		}
	}
	return webtest.Send(t, req)
}

// wantError checks that a response is the envelope with status and code
// and returns its message.
func wantError(t *testing.T, what string, st int, body []byte, wantStatus int, wantCode string) string {
	t.Helper()
	var env envelopeOf
	if err := json.Unmarshal(body, &env); err != nil || st != wantStatus || env.Error.Code != wantCode ||
		!strings.HasPrefix(string(body), `{"error":{"code":`) || env.Error.Message == "" {
		t.Errorf("%s: got %d %s, want %d %s in the envelope", what, st, body, wantStatus, wantCode)
	}
	return env.Error.Message
}

// TestGRPCHeadersAreNotHonoured: the REST API is HTTP, not gRPC over
// HTTP. A Grpc-Timeout header used to become the deadline of the gRPC
// call, so that "Grpc-Timeout: 1n", without any token, was answered 503
// service_unavailable and logged as an error (a false outage signal
// anyone could raise), and "Grpc-Timeout: garbage" was a 400 quoting gRPC
// internals. Such headers, and Grpc-Metadata-*, are now ignored: the
// answer is what it would be without them.
func TestGRPCHeadersAreNotHonoured(t *testing.T) {
	var logs lockedbuf.Buffer
	p := centraltest.StartPlaneWith(t, func(c *central.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	if err := p.Tokens.SetAuditTokens(context.Background(), "acme", []string{acmeToken}); err != nil {
		t.Fatal(err)
	}
	const heads = "/v1/tenants/acme/audit/heads?day=2026-11-23"
	for _, timeout := range []string{"1n", "1u", "garbage", "99999999S"} {
		st, _, body := send(t, p.BaseURL, heads, map[string][]string{"Grpc-Timeout": {timeout}})
		msg := wantError(t, "Grpc-Timeout "+timeout+", no token", st, body, http.StatusUnauthorized, "unauthorized")
		if strings.Contains(strings.ToLower(msg), "grpc") {
			t.Errorf("Grpc-Timeout %s: the message speaks of gRPC: %s", timeout, msg)
		}
		st, _, body = send(t, p.BaseURL, heads, map[string][]string{
			"Grpc-Timeout": {timeout}, "Authorization": {"Bearer " + acmeToken},
			"Grpc-Metadata-Authorization": {"Bearer tga_nobody_knows_me"},
		})
		if st != http.StatusOK || string(body) != `{"data":[]}` {
			t.Errorf("Grpc-Timeout %s, with the token: %d %s", timeout, st, body)
		}
	}
	// An ERROR line is what an operator is paged on; none of these
	// requests is the plane's failure.
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("client headers produced error log lines:\n%s", logs.String())
	}
}

// TestNonCanonicalPathsAreNotFound: http.ServeMux in front of the
// gateway answered a path with empty, '.' or '..' segments with a 307 to
// the cleaned path, in HTML, before the token was looked at; the cleaned
// path may be another route (/v1/tenants//audit/heads became
// /v1/tenants/audit/heads) or another tenant's (acme/../beta). Such a path
// is a client's mistake and is 404 not_found in the envelope, token or
// not, like any other unknown path, as on the appliance gateway.
func TestNonCanonicalPathsAreNotFound(t *testing.T) {
	w := newWorld(t)
	day := "?day=" + w.acme1.Day
	for _, path := range []string{
		"/v1/tenants//audit/heads" + day,
		"/v1/tenants/acme/../globex/audit/heads" + day,
		"/v1/tenants/acme/./audit/heads" + day,
		"/v1//tenants/acme/audit/heads" + day,
		"//v1/tenants/acme/audit/heads" + day,
		"/v1/tenants/acme/audit/heads/.." + day,
		"/v1/tenants/acme/audit/proof/." + day,
		"/v1/./openapi.json",
		"/v1/nope/../openapi.json",
		"/v1/nope", // an unknown path, for comparison
	} {
		for _, token := range []string{"", acmeToken, globexToken, "tga_nobody_knows_me"} {
			hdr := map[string][]string{}
			if token != "" {
				hdr["Authorization"] = []string{"Bearer " + token}
			}
			st, h, body := send(t, w.plane.BaseURL, path, hdr)
			wantError(t, path+" with token "+token, st, body, http.StatusNotFound, "not_found")
			if loc := h.Get("Location"); loc != "" {
				t.Errorf("%s: redirected to %s", path, loc)
			}
		}
	}
}

// TestDuplicateAuthorization: with two Authorization headers the first
// was used and the second silently ignored. Credentials that say two
// things are refused (401), whichever comes first, over REST and over
// gRPC.
func TestDuplicateAuthorization(t *testing.T) {
	w := newWorld(t)
	heads := "/v1/tenants/acme/audit/heads?day=" + w.acme1.Day
	for _, vals := range [][]string{
		{"Bearer " + acmeToken, "Bearer bad"},
		{"Bearer bad", "Bearer " + acmeToken},
		{"Bearer " + acmeToken, "Bearer " + globexToken},
		{"Bearer " + acmeToken, "Bearer " + acmeToken},
		{"Bearer " + acmeToken, ""},
	} {
		st, _, body := send(t, w.plane.BaseURL, heads, map[string][]string{"Authorization": vals})
		msg := wantError(t, strings.Join(vals, " + "), st, body, http.StatusUnauthorized, "unauthorized")
		if !strings.Contains(msg, "more than one") {
			t.Errorf("%q: the message does not say what is wrong: %s", vals, msg)
		}
	}
	// One header is still fine.
	if st, _, body := send(t, w.plane.BaseURL, heads, map[string][]string{"Authorization": {"Bearer " + acmeToken}}); st != http.StatusOK {
		t.Fatalf("one token: %d %s", st, body)
	}
	// A gRPC client sending a second authorization value, after the
	// token its credentials send.
	c := w.plane.QueryClient(t, acmeToken)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer tga_nobody_knows_me")
	_, err := c.ListHeads(ctx, &centralv1.ListHeadsRequest{TenantId: "acme", Day: w.acme1.Day})
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(status.Convert(err).Message(), "more than one") {
		t.Fatalf("gRPC, two authorization values: %v", err)
	}
}

// TestMissingQueryParameters: a missing parameter was reported in
// protovalidate's words, with the field's regular expression. Each is now
// named with the form it takes, and a malformed one is described without
// a regex, with the same status and code as before (400
// invalid_request).
func TestMissingQueryParameters(t *testing.T) {
	w := newWorld(t)
	day, known := w.acme1.Day, w.acme1.Leaves[0].RequestID
	for _, c := range []struct {
		path string
		want []string // in the message
	}{
		{"/v1/tenants/acme/audit/heads", []string{"day is required (YYYY-MM-DD)"}},
		{"/v1/tenants/acme/audit/heads?day=", []string{"day is required (YYYY-MM-DD)"}},
		{"/v1/tenants/acme/audit/heads?day=2026-1-01", []string{"day must be a date, YYYY-MM-DD"}},
		{"/v1/tenants/acme/audit/proof?appliance_id=app_one&day=" + day, []string{"request_id is required (req_<id>)"}},
		{"/v1/tenants/acme/audit/proof?request_id=" + known + "&day=" + day, []string{"appliance_id is required (app_<id>)"}},
		{"/v1/tenants/acme/audit/proof?appliance_id=app_one&request_id=" + known, []string{"day is required (YYYY-MM-DD)"}},
		{"/v1/tenants/acme/audit/proof", []string{"appliance_id is required (app_<id>)", "day is required (YYYY-MM-DD)", "request_id is required (req_<id>)"}},
		{"/v1/tenants/acme/audit/proof?appliance_id=one&day=" + day + "&request_id=" + known, []string{"appliance_id must be app_<id>"}},
		{"/v1/tenants/acme/audit/proof?appliance_id=app_one&day=" + day + "&request_id=req-1", []string{"request_id must be req_<id>"}},
		// A query string that does not parse is reported with the rest:
		// the pairs that do parse are checked too.
		{"/v1/tenants/acme/audit/heads?page_token=%zz", []string{"the query string must be name=value pairs", "day is required (YYYY-MM-DD)"}},
		{"/v1/tenants/acme/audit/proof?day=" + day + "&x=%zz&request_id=req-1", []string{"the query string must be name=value pairs", "appliance_id is required (app_<id>)", "request_id must be req_<id>"}},
		// Bytes that are not UTF-8 are a bad request, not an internal
		// error of the gRPC client encoding them.
		{"/v1/tenants/acme/audit/heads?day=%ff", []string{"day must be UTF-8 text"}},
		{"/v1/tenants/acme/audit/heads?day=" + day + "&page_size=10&page_token=%ff", []string{"page_token must be UTF-8 text"}},
		{"/v1/tenants/acme/audit/proof?appliance_id=%ff&day=" + day + "&request_id=" + known, []string{"appliance_id must be UTF-8 text"}},
		{"/v1/tenants/acme/audit/forks?day=%ff", []string{"day must be UTF-8 text"}},
	} {
		st, _, body := send(t, w.plane.BaseURL, c.path, map[string][]string{"Authorization": {"Bearer " + acmeToken}})
		msg := wantError(t, c.path, st, body, http.StatusBadRequest, "invalid_request")
		for _, s := range c.want {
			if !strings.Contains(msg, s) {
				t.Errorf("%s: message %q does not say %q", c.path, msg, s)
			}
		}
		for _, bad := range []string{"regex", "pattern", "^", "$", "validation error", "\n"} {
			if strings.Contains(msg, bad) {
				t.Errorf("%s: message %q holds %q", c.path, msg, bad)
			}
		}
	}
}

// A request that announces a body and stalls it is answered at once and
// its connection closed, token or none: no route reads a body, and
// net/http used to wait for the unread one with no deadline, before
// answering and before closing.
func TestStalledBodyReleasesTheConnection(t *testing.T) {
	w := newWorld(t)
	host := strings.TrimPrefix(w.plane.BaseURL, "http://")
	heads := "/v1/tenants/acme/audit/heads?day=" + w.acme1.Day
	for _, tc := range []struct {
		name, path, token string
		status            int
	}{
		{"no token", heads, "", http.StatusUnauthorized},
		{"token", heads, acmeToken, http.StatusOK},
		{"no route", "/v1/nope", "", http.StatusNotFound},
		{"openapi", "/v1/openapi.json", "", http.StatusOK},
	} {
		for _, stalled := range webtest.StalledBodies {
			t.Run(tc.name+" "+strings.Fields(stalled)[0], func(t *testing.T) {
				t.Parallel()
				auth := ""
				if tc.token != "" {
					auth = "Authorization: Bearer " + tc.token + "\r\n"
				}
				webtest.WantAnswerThenClose(t, host, "GET "+tc.path+" HTTP/1.1\r\nHost: "+host+"\r\n"+auth+stalled, tc.status)
			})
		}
	}
}
