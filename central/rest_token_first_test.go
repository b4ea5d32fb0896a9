package central_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"gopkg.in/yaml.v3"

	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
	"github.com/tollgate-dev/tollgate/internal/webtest"
)

// TestTokenFirstForEveryQuery: grpc-gateway parses the query string
// before the gRPC call, and refused some queries itself (a parameter
// given twice, a malformed query string): such a request was 400 without
// any token, in the parser's words, before the token was looked at. The
// token is now checked first for every query: without a valid token 401,
// with another tenant's 403, with the status, code and message the gRPC
// API gives for the same credentials; with the right token the query is
// 400 invalid_request in words that name the parameter.
func TestTokenFirstForEveryQuery(t *testing.T) {
	w := newWorld(t)
	day, app, known := w.acme1.Day, w.acme1.App.ID, w.acme1.Leaves[0].RequestID
	heads := "/v1/tenants/acme/audit/heads?"
	proof := "/v1/tenants/acme/audit/proof?"
	queries := []struct {
		name, path string
		want       []string // in the 400's message, with the right token
	}{
		{"heads, day twice", heads + "day=" + day + "&day=2026-11-02", []string{"day must be given once"}},
		{"heads, day twice, the same", heads + "day=" + day + "&day=" + day, []string{"day must be given once"}},
		{"heads, page_token twice", heads + "day=" + day + "&page_size=2&page_token=YXBwX29uZQ&page_token=YXBwX3R3bw",
			[]string{"page_token must be given once"}},
		{"heads, page_token and pageToken", heads + "day=" + day + "&page_size=2&page_token=YXBwX29uZQ&pageToken=YXBwX3R3bw",
			[]string{"page_token must be given once"}},
		{"heads, day and page_token twice", heads + "day=" + day + "&day=" + day + "&page_size=2&page_token=a&page_token=b",
			[]string{"day must be given once", "page_token must be given once"}},
		{"heads, page_size a word", heads + "day=" + day + "&page_size=ten", []string{"page_size must be an integer from 1 to 1000"}},
		{"heads, page_size twice", heads + "day=" + day + "&page_size=2&page_size=3", []string{"page_size must be an integer from 1 to 1000"}},
		{"heads, page_size and pageSize", heads + "day=" + day + "&page_size=2&pageSize=3", []string{"page_size must be an integer from 1 to 1000"}},
		{"heads, page_size beyond 32 bits", heads + "day=" + day + "&page_size=4294967297", []string{"page_size must be an integer from 1 to 1000"}},
		{"heads, malformed escape", heads + "day=" + day + "&page_token=%zz", []string{"query string must be"}},
		{"heads, semicolon", heads + "day=" + day + ";page_size=2", []string{"query string must be"}},
		{"proof, appliance_id twice", proof + "appliance_id=" + app + "&appliance_id=app_two&day=" + day + "&request_id=" + known,
			[]string{"appliance_id must be given once"}},
		{"proof, appliance_id and applianceId", proof + "appliance_id=" + app + "&applianceId=app_two&day=" + day + "&request_id=" + known,
			[]string{"appliance_id must be given once"}},
		{"proof, day twice", proof + "appliance_id=" + app + "&day=" + day + "&day=" + day + "&request_id=" + known,
			[]string{"day must be given once"}},
		{"proof, request_id twice", proof + "appliance_id=" + app + "&day=" + day + "&request_id=" + known + "&request_id=req_other",
			[]string{"request_id must be given once"}},
		{"proof, request_id and requestId", proof + "appliance_id=" + app + "&day=" + day + "&request_id=" + known + "&requestId=" + known,
			[]string{"request_id must be given once"}},
		{"proof, malformed escape", proof + "appliance_id=" + app + "&day=" + day + "&request_id=%zz", []string{"query string must be"}},
		{"heads, day[x]", heads + "day[x]=" + day, []string{"day must be given as day=value"}},
		{"heads, day.x", heads + "day.x=" + day, []string{"day must be given as day=value"}},
		{"heads, page_size[x]", heads + "day=" + day + "&page_size[x]=2", []string{"page_size must be given as page_size=value"}},
		{"proof, requestId[]", proof + "appliance_id=" + app + "&day=" + day + "&requestId[]=" + known, []string{"request_id must be given as request_id=value"}},
	}

	// What the gRPC API answers, for each of these credentials, to a
	// well-formed request of either route.
	ctx := context.Background()
	grpcAnswer := func(t *testing.T, path string, tokens []string) *status.Status {
		t.Helper()
		first := ""
		if len(tokens) > 0 {
			first = strings.TrimPrefix(tokens[0], "Bearer ")
		}
		c := w.plane.QueryClient(t, first)
		cctx := ctx
		for _, tok := range tokens[min(1, len(tokens)):] {
			cctx = metadata.AppendToOutgoingContext(cctx, "authorization", tok)
		}
		var err error
		if strings.HasPrefix(path, heads) {
			_, err = c.ListHeads(cctx, &centralv1.ListHeadsRequest{TenantId: "acme", Day: day})
		} else {
			_, err = c.GetProof(cctx, &centralv1.GetProofRequest{TenantId: "acme", ApplianceId: app, Day: day, RequestId: known})
		}
		if err == nil {
			t.Fatalf("gRPC with %q: no error", tokens)
		}
		return status.Convert(err)
	}
	refused := []struct {
		name   string
		tokens []string // Authorization values, in order
		status int
		code   string
	}{
		{"no token", nil, http.StatusUnauthorized, "unauthorized"},
		{"unknown token", []string{"Bearer tga_nobody_knows_me"}, http.StatusUnauthorized, "unauthorized"},
		{"two tokens", []string{"Bearer " + acmeToken, "Bearer " + acmeToken}, http.StatusUnauthorized, "unauthorized"},
		{"another tenant's token", []string{"Bearer " + globexToken}, http.StatusForbidden, "forbidden"},
	}
	for _, q := range queries {
		t.Run(q.name, func(t *testing.T) {
			for _, cred := range refused {
				st, _, body := send(t, w.plane.BaseURL, q.path, map[string][]string{"Authorization": cred.tokens})
				msg := wantError(t, cred.name, st, body, cred.status, cred.code)
				if want := grpcAnswer(t, q.path, cred.tokens).Message(); msg != want {
					t.Errorf("%s: message %q, the gRPC API says %q", cred.name, msg, want)
				}
			}
			st, _, body := send(t, w.plane.BaseURL, q.path, map[string][]string{"Authorization": {"Bearer " + acmeToken}})
			msg := wantError(t, "the right token", st, body, http.StatusBadRequest, "invalid_request")
			for _, s := range q.want {
				if !strings.Contains(msg, s) {
					t.Errorf("the right token: message %q does not say %q", msg, s)
				}
			}
			for _, no := range []string{`"`, "too many", "duplicate", "field", "parsing", "strconv", "invalid URL", "semicolon", "\n"} {
				if strings.Contains(msg, no) {
					t.Errorf("the right token: message %q holds %q", msg, no)
				}
			}
		})
	}
}

// TestFormPostIsNotAGet: grpc-gateway served a POST with a form content
// type as a GET of the same route (its "path length fallback"), parsing
// the query before the token: a malformed query was 400 without any
// token, and a POST was served where the API documents 405 for every
// method but GET.
func TestFormPostIsNotAGet(t *testing.T) {
	w := newWorld(t)
	for _, path := range []string{
		"/v1/tenants/acme/audit/heads?day=" + w.acme1.Day,
		"/v1/tenants/acme/audit/heads?day=%zz",
		"/v1/tenants/acme/audit/proof?appliance_id=app_one&day=" + w.acme1.Day + "&request_id=" + w.acme1.Leaves[0].RequestID,
	} {
		for _, token := range []string{"", acmeToken} {
			req, err := http.NewRequest(http.MethodPost, w.plane.BaseURL+path, strings.NewReader("day="+w.acme1.Day))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			st, hdr, body := webtest.Send(t, req)
			wantError(t, "POST form "+path+" token "+token, st, body, http.StatusMethodNotAllowed, "method_not_allowed")
			if hdr.Get("Allow") != http.MethodGet {
				t.Errorf("POST form %s: Allow %q", path, hdr.Get("Allow"))
			}
		}
	}
}

// TestEveryRouteIsGated: every method of the query service has an HTTP
// rule, every rule names one of its methods, and every route a rule makes
// is served with the gate's query checks, for its own request message: a
// string parameter given twice is 400 "<name> must be given once" (a
// route missing from the gate's table would be 500, one mapped to another
// message would let the parameter through). A new RPC or HTTP rule is
// checked here without this test changing.
func TestEveryRouteIsGated(t *testing.T) {
	raw, err := os.ReadFile("../proto/tollgate/central/v1/central_http.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		HTTP struct {
			Rules []map[string]string `yaml:"rules"`
		} `yaml:"http"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	svc := centralv1.File_tollgate_central_v1_central_proto.Services().ByName("AuditQueryService")
	rules := map[protoreflect.FullName]string{}
	for _, rule := range cfg.HTTP.Rules {
		sel := protoreflect.FullName(rule["selector"])
		if len(rule) != 2 || rule["get"] == "" {
			t.Fatalf("rule %v: this test knows GET rules only; teach it the others", rule)
		}
		if sel.Parent() != svc.FullName() || svc.Methods().ByName(sel.Name()) == nil {
			t.Errorf("rule %v names no method of %s", rule, svc.FullName())
		}
		rules[sel] = rule["get"]
	}
	w := newWorld(t)
	pathVar := regexp.MustCompile(`\{([a-z_]+)(=[^}]*)?\}`)
	methods := svc.Methods()
	for i := range methods.Len() {
		m := methods.Get(i)
		tmpl, ok := rules[m.FullName()]
		if !ok {
			t.Errorf("%s has no HTTP rule", m.FullName())
			continue
		}
		inPath := map[string]bool{}
		path := pathVar.ReplaceAllStringFunc(tmpl, func(v string) string {
			inPath[pathVar.FindStringSubmatch(v)[1]] = true
			return "acme"
		})
		checked := 0
		fields := m.Input().Fields()
		for j := range fields.Len() {
			f := fields.Get(j)
			name := string(f.Name())
			if inPath[name] || f.Kind() != protoreflect.StringKind || f.IsList() || f.IsMap() {
				continue
			}
			checked++
			q := path + "?" + name + "=a&" + name + "=b"
			st, _, body := send(t, w.plane.BaseURL, q, map[string][]string{"Authorization": {"Bearer " + acmeToken}})
			msg := wantError(t, q, st, body, http.StatusBadRequest, "invalid_request")
			if !strings.Contains(msg, name+" must be given once") {
				t.Errorf("%s: message %q does not say %q", q, msg, name+" must be given once")
			}
			st, _, body = send(t, w.plane.BaseURL, q, nil)
			wantError(t, q+" without a token", st, body, http.StatusUnauthorized, "unauthorized")
		}
		if checked == 0 {
			t.Errorf("%s (%s): no string query parameter to check the route with", m.FullName(), tmpl)
		}
	}
}

// TestRepeatedParameterWithTheOthers: a parameter given twice used to be
// reported alone, before the request's other problems, which the gRPC
// interceptor reports together. It is now one problem among the others,
// in one message joined by "; ", in the interceptor's order (the
// message's own rules, then field by field) and words; the repeated
// parameter's own rules are not applied to either of its values.
func TestRepeatedParameterWithTheOthers(t *testing.T) {
	w := newWorld(t)
	day, app, known := w.acme1.Day, w.acme1.App.ID, w.acme1.Leaves[0].RequestID
	heads := "/v1/tenants/acme/audit/heads?"
	proof := "/v1/tenants/acme/audit/proof?"
	for _, c := range []struct {
		name, path, want string
	}{
		{"proof, day twice, request_id malformed", proof + "appliance_id=" + app + "&day=" + day + "&day=" + day + "&request_id=bad",
			"day must be given once; request_id must be req_<id>: req_ and 1 to 64 letters or digits"},
		{"proof, appliance_id malformed, day twice", proof + "appliance_id=bad&day=" + day + "&day=x&request_id=" + known,
			"appliance_id must be app_<id>: app_ and 1 to 64 letters, digits, '_' or '-'; day must be given once"},
		{"proof, request_id twice, nothing else", proof + "request_id=" + known + "&requestId=" + known,
			"appliance_id is required (app_<id>); day is required (YYYY-MM-DD); request_id must be given once"},
		{"proof, two repeated, one malformed", proof + "appliance_id=" + app + "&appliance_id=" + app + "&day=2026-1-1&request_id=a&request_id=b",
			"appliance_id must be given once; day must be a date, YYYY-MM-DD; request_id must be given once"},
		{"heads, page_token without page_size, day twice", heads + "day=" + day + "&day=" + day + "&page_token=YXBw",
			"page_token needs page_size (1 to 1000); day must be given once"},
		{"heads, day twice, page_size a word", heads + "day=" + day + "&day=" + day + "&page_size=ten",
			"day must be given once; page_size must be an integer from 1 to 1000"},
		{"heads, day malformed, page_token twice", heads + "day=yesterday&page_size=2&page_token=a&pageToken=b",
			"day must be a date, YYYY-MM-DD; page_token must be given once"},
		{"heads, tenant_id in the query is the path's", heads + "tenant_id=Nope&day=" + day + "&day=" + day,
			"day must be given once"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, _, body := send(t, w.plane.BaseURL, c.path, map[string][]string{"Authorization": {"Bearer " + acmeToken}})
			msg := wantError(t, c.path, st, body, http.StatusBadRequest, "invalid_request")
			if msg != c.want {
				t.Errorf("message\n%q, want\n%q", msg, c.want)
			}
			// Without its repeated parameters the query reaches the
			// validation interceptor: the other problems are those it
			// reports, in its words and order.
			path, rawQuery, _ := strings.Cut(c.path, "?")
			q, err := url.ParseQuery(rawQuery)
			if err != nil {
				t.Fatal(err)
			}
			n := map[string]int{}
			for k, v := range q {
				n[snakeCase(k)] += len(v)
			}
			for k := range q {
				if n[snakeCase(k)] > 1 {
					delete(q, k)
				}
			}
			st, _, body = send(t, w.plane.BaseURL, path+"?"+q.Encode(), map[string][]string{"Authorization": {"Bearer " + acmeToken}})
			alone := strings.Split(wantError(t, path+"?"+q.Encode(), st, body, http.StatusBadRequest, "invalid_request"), "; ")
			for _, part := range strings.Split(msg, "; ") {
				if strings.HasSuffix(part, " must be given once") {
					continue
				}
				i := slices.Index(alone, part)
				if i < 0 {
					t.Errorf("%q is not among the interceptor's problems %q, or not in their order", part, alone)
					break
				}
				alone = alone[i+1:]
			}
		})
	}
}

// TestBracketedParameters: a parameter of the request in grpc-gateway's
// map or nested syntax (day[x], day.x) was refused by its parser in its
// own words ("field \"day\" is not a map", "invalid path: \"day\" is not
// a message"), or ignored (day[a][b]). Every such form of a parameter is
// now 400 invalid_request in the API's words, naming the parameter, with
// the request's other problems. A key that names no parameter is ignored,
// as before, and so is one naming the path's tenant_id.
func TestBracketedParameters(t *testing.T) {
	w := newWorld(t)
	day, app, known := w.acme1.Day, w.acme1.App.ID, w.acme1.Leaves[0].RequestID
	heads := "/v1/tenants/acme/audit/heads?"
	proof := "/v1/tenants/acme/audit/proof?"
	const dayForm = "day must be given as day=value, without brackets or dots"
	for _, c := range []struct {
		name, path, want string
	}{
		{"day[x]", heads + "day[x]=" + day, dayForm},
		{"day[]", heads + "day[]=" + day, dayForm},
		{"day[a][b]", heads + "day[a][b]=" + day, dayForm},
		{"day.x", heads + "day.x=" + day, dayForm},
		{"day.", heads + "day.=" + day, dayForm},
		{"day and day[x]", heads + "day=" + day + "&day[x]=" + day, dayForm},
		{"day twice and day[x]", heads + "day=" + day + "&day=" + day + "&day[x]=" + day, dayForm},
		{"escaped brackets", heads + "day%5Bx%5D=" + day, dayForm},
		{"pageSize[x]", heads + "day=" + day + "&pageSize[x]=3",
			"page_size must be given as page_size=value, without brackets or dots"},
		{"page_token.x and a malformed day", heads + "day=2026&page_size=2&page_token.x=a",
			"day must be a date, YYYY-MM-DD; page_token must be given as page_token=value, without brackets or dots"},
		{"proof, request_id[x], appliance_id malformed", proof + "appliance_id=app&day=" + day + "&request_id[x]=" + known,
			"appliance_id must be app_<id>: app_ and 1 to 64 letters, digits, '_' or '-'; request_id must be given as request_id=value, without brackets or dots"},
		{"proof, day given twice and appliance_id[x]", proof + "applianceId[x]=" + app + "&day=" + day + "&day=" + day + "&request_id=" + known,
			"appliance_id must be given as appliance_id=value, without brackets or dots; day must be given once"},
		// Keys that name no parameter, and tenant_id, which the path
		// sets, are ignored as they always were.
		{"unknown keys", heads + "nope[x]=1&x.day=1&[day]=1&.day=1&tenant_id[x]=beta&tenantId.x=beta&day=2026", "day must be a date, YYYY-MM-DD"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, _, body := send(t, w.plane.BaseURL, c.path, map[string][]string{"Authorization": {"Bearer " + acmeToken}})
			if msg := wantError(t, c.path, st, body, http.StatusBadRequest, "invalid_request"); msg != c.want {
				t.Errorf("message\n%q, want\n%q", msg, c.want)
			}
		})
	}
}

// snakeCase is the proto name of a parameter's JSON name (requestId:
// request_id).
func snakeCase(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsUpper(r) {
			b.WriteByte('_')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
