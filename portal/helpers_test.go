package portal

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/clocktest"
	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/server/keys"
)

func TestMain(m *testing.M) { etcdtest.Main(m) }

const testPassword = "correct horse battery"

// fixture is a portal over its own etcd prefix, with one administrator
// (alice of tenant acme) and a fake clock.
type fixture struct {
	t     *testing.T
	srv   *httptest.Server
	keys  *keys.Store
	admin *Admins
	clock *clocktest.Clock
	cache *keys.Cache
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, nil)
}

// newFixtureWith is newFixture with tune adjusting the portal's Config.
func newFixtureWith(t *testing.T, tune func(*Config)) *fixture {
	t.Helper()
	cli := etcdtest.Client(t)
	clock := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	f := &fixture{t: t, keys: keys.NewStore(cli, clock.Now), admin: NewAdmins(cli, clock.Now), clock: clock}
	if err := f.admin.Create(context.Background(), "acme", "alice", testPassword); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Admins:   f.admin,
		Sessions: NewSessions(cli, time.Hour, 20*time.Minute, clock.Now),
		Keys:     f.keys,
		Models:   func(context.Context) ([]string, error) { return []string{"builtin/echo", "builtin/embed"}, nil },
		Now:      clock.Now,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		// Every test browser signs in from 127.0.0.1; the address
		// limit has a test of its own.
		SignInsPerAddress: 1000,
	}
	if tune != nil {
		tune(&cfg)
	}
	p := New(cfg)
	f.srv = httptest.NewServer(p)
	t.Cleanup(f.srv.Close)
	// The gateway's view of the keys, to check that a secret shown by
	// the portal authenticates there.
	f.cache = keys.NewCache(cli, clock.Now, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = f.cache.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-f.cache.Ready()
	return f
}

// browser is a client with its own cookies, following redirects as a
// browser does, and sending the Origin header a browser sends with forms.
type browser struct {
	f      *fixture
	client *http.Client
}

func (f *fixture) browser() *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return &browser{f: f, client: &http.Client{Jar: jar}}
}

type page struct {
	status int
	header http.Header
	body   string
	url    string
}

func (b *browser) do(req *http.Request) page {
	b.f.t.Helper()
	resp, err := b.client.Do(req)
	if err != nil {
		b.f.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.f.t.Fatal(err)
	}
	return page{status: resp.StatusCode, header: resp.Header, body: string(body), url: resp.Request.URL.Path}
}

func (b *browser) get(path string) page {
	b.f.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.f.srv.URL+path, nil)
	if err != nil {
		b.f.t.Fatal(err)
	}
	return b.do(req)
}

// post sends form to path from the portal's own origin.
func (b *browser) post(path string, form url.Values) page {
	b.f.t.Helper()
	return b.postFrom(b.f.srv.URL, path, form)
}

func (b *browser) postFrom(origin, path string, form url.Values) page {
	b.f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.f.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	return b.do(req)
}

func (b *browser) signIn(tenant, user, password string) page {
	b.f.t.Helper()
	return b.post("/login", url.Values{"tenant": {tenant}, "user": {user}, "password": {password}})
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the CSRF token of a page's forms.
func csrf(t *testing.T, p page) string {
	t.Helper()
	m := csrfRe.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no CSRF token on %s:\n%s", p.url, p.body)
	}
	return m[1]
}

var secretRe = regexp.MustCompile(`<code id="secret">(tgk_[A-Za-z0-9_-]+)</code>`)
var keyIDRe = regexp.MustCompile(`<code id="key-id">(key_[a-z0-9]+)</code>`)

// createKey fills in the create form with extra fields and returns the
// page it answers with.
func (b *browser) createKey(label string, extra url.Values) page {
	b.f.t.Helper()
	form := b.get("/keys/new")
	v := url.Values{"csrf": {csrf(b.f.t, form)}, "label": {label}, "rpm": {"0"}, "tpd": {"0"}, "models": {"all"}}
	for k, vs := range extra {
		v[k] = vs
	}
	return b.post("/keys", v)
}

// waitAuth waits until the gateway's key cache answers want for secret.
func (f *fixture) waitAuth(secret string, want bool) {
	f.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := f.cache.Authenticate(secret)
		if (err == nil) == want {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("secret authenticates: %v, want %v", err == nil, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
