package portal

import (
	"context"
	"errors"
	"html"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tollgate-dev/tollgate/server/keys"
)

func TestKeyLifecycle(t *testing.T) {
	f := newFixture(t)
	b := f.browser()

	if p := b.get("/"); p.url != "/login" || p.status != http.StatusOK {
		t.Fatalf("signed out, / ends at %s (%d), want the sign-in page", p.url, p.status)
	}
	p := b.signIn("acme", "alice", testPassword)
	if p.status != http.StatusOK || p.url != "/" || !strings.Contains(p.body, `id="no-keys"`) {
		t.Fatalf("sign-in: %d at %s:\n%s", p.status, p.url, p.body)
	}

	p = b.createKey("ci pipeline", url.Values{
		"models": {"some"}, "model": {"builtin/echo"}, "other_models": {"vllm/llama-3, builtin/echo"},
		"rpm": {"600"}, "tpd": {"1000000"}, "max_output_tokens": {"2048"}, "tools": {"get_weather, tool:search"}, "expires": {"2026-04-01"},
	})
	if p.status != http.StatusCreated {
		t.Fatalf("create: %d:\n%s", p.status, p.body)
	}
	m := secretRe.FindStringSubmatch(p.body)
	id := keyIDRe.FindStringSubmatch(p.body)
	if m == nil || id == nil {
		t.Fatalf("the created page shows no secret or key id:\n%s", p.body)
	}
	secret, keyID := m[1], id[1]
	if got := p.header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("the secret's page has Cache-Control %q, want no-store", got)
	}

	key, err := f.keys.Get(context.Background(), "acme", keyID)
	if err != nil {
		t.Fatal(err)
	}
	if key.GetAllModels() || strings.Join(key.GetModels(), " ") != "builtin/echo vllm/llama-3" ||
		key.GetRpm() != 600 || key.GetTpd() != 1_000_000 || key.GetMaxOutputTokens() != 2048 ||
		strings.Join(key.GetScopes(), " ") != "tool:get_weather tool:search" ||
		!key.GetExpireTime().AsTime().Equal(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("stored key: %v", key)
	}
	f.waitAuth(secret, true)

	// The secret is shown once: the list shows only its hint.
	list := b.get("/")
	if strings.Contains(list.body, secret) {
		t.Fatal("the key list shows the secret")
	}
	if !strings.Contains(list.body, `data-key-id="`+keyID+`"`) || !strings.Contains(list.body, secret[:8]+"…") ||
		!strings.Contains(list.body, "1,000,000") || !strings.Contains(list.body, `<td class="max-output">2,048</td>`) {
		t.Fatalf("the list does not show the key:\n%s", list.body)
	}

	// Revoking asks first: the list links to a page that names the key.
	confirm := b.get("/keys/" + keyID + "/revoke")
	if confirm.status != http.StatusOK || !strings.Contains(confirm.body, `<code id="key-id">`+keyID+`</code>`) || !strings.Contains(confirm.body, `id="confirm-revoke"`) {
		t.Fatalf("confirmation page: %d\n%s", confirm.status, confirm.body)
	}
	if k, _ := f.keys.Get(context.Background(), "acme", keyID); k.GetRevokeTime() != nil {
		t.Fatal("showing the confirmation revoked the key")
	}
	p = b.post("/keys/"+keyID+"/revoke", url.Values{"csrf": {csrf(t, confirm)}})
	if p.status != http.StatusOK || !strings.Contains(p.body, `id="notice"`) || !strings.Contains(p.body, `<td class="state">revoked</td>`) {
		t.Fatalf("revoke: %d:\n%s", p.status, p.body)
	}
	f.waitAuth(secret, false)
}

func TestCreateFormErrors(t *testing.T) {
	f := newFixture(t)
	b := f.browser()
	b.signIn("acme", "alice", testPassword)
	if p := b.createKey("taken", nil); p.status != http.StatusCreated {
		t.Fatalf("first key: %d", p.status)
	}
	for _, tc := range []struct {
		name   string
		label  string
		extra  url.Values
		status int
		field  string
	}{
		{"empty label", " ", nil, http.StatusBadRequest, "label"},
		{"label taken", "taken", nil, http.StatusConflict, "label"},
		{"no model", "a", url.Values{"models": {"some"}}, http.StatusBadRequest, "models"},
		{"bad model", "b", url.Values{"models": {"some"}, "other_models": {"no-namespace"}}, http.StatusBadRequest, "models"},
		{"negative rpm", "c", url.Values{"rpm": {"-1"}}, http.StatusBadRequest, "rpm"},
		{"rpm above the most", "c", url.Values{"rpm": {"1000000001"}}, http.StatusBadRequest, "rpm"},
		{"tpd not a number", "d", url.Values{"tpd": {"1e6"}}, http.StatusBadRequest, "tpd"},
		{"max output tokens not a number", "d", url.Values{"max_output_tokens": {"lots"}}, http.StatusBadRequest, "max_output_tokens"},
		{"max output tokens above the most", "d", url.Values{"max_output_tokens": {"1000000001"}}, http.StatusBadRequest, "max_output_tokens"},
		{"negative max output tokens", "d", url.Values{"max_output_tokens": {"-5"}}, http.StatusBadRequest, "max_output_tokens"},
		{"bad tool", "e", url.Values{"tools": {"get weather!"}}, http.StatusBadRequest, "tools"},
		{"expiry today", "f", url.Values{"expires": {"2026-03-01"}}, http.StatusBadRequest, "expires"},
		{"expiry not a date", "g", url.Values{"expires": {"next week"}}, http.StatusBadRequest, "expires"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := b.createKey(tc.label, tc.extra)
			if p.status != tc.status || !strings.Contains(p.body, `id="`+tc.field+`-error"`) {
				t.Fatalf("%d, want %d with an error on %s:\n%s", p.status, tc.status, tc.field, p.body)
			}
			if strings.Contains(p.body, `id="secret"`) {
				t.Fatal("a refused form shows a secret")
			}
		})
	}
	list, _, err := f.keys.List(context.Background(), "acme", 0, "")
	if err != nil || len(list) != 1 {
		t.Fatalf("keys after refused forms: %d (%v), want 1", len(list), err)
	}
}

func TestFormsNeedTheSessionsToken(t *testing.T) {
	f := newFixture(t)
	b := f.browser()
	list := b.signIn("acme", "alice", testPassword)
	token := csrf(t, list)
	// Another token: its first character changed (to one it is not).
	wrong := "x" + token[1:]
	if token[0] == 'x' {
		wrong = "y" + token[1:]
	}
	for _, tc := range []struct {
		name   string
		origin string
		csrf   string
		status int
	}{
		{"no token", f.srv.URL, "", http.StatusForbidden},
		{"wrong token", f.srv.URL, wrong, http.StatusForbidden},
		{"another origin", "https://evil.example", token, http.StatusForbidden},
		{"another port", "http://127.0.0.1:1", token, http.StatusForbidden},
		{"opaque origin", "null", token, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := b.postFrom(tc.origin, "/keys", url.Values{"csrf": {tc.csrf}, "label": {tc.name}, "models": {"all"}})
			if p.status != tc.status {
				t.Fatalf("%d, want %d", p.status, tc.status)
			}
		})
	}
	// Another browser, never signed in, gets nothing either.
	if p := f.browser().post("/keys", url.Values{"csrf": {token}, "label": {"x"}}); p.status != http.StatusUnauthorized {
		t.Fatalf("without a session: %d, want 401", p.status)
	}
	list2, _, err := f.keys.List(context.Background(), "acme", 0, "")
	if err != nil || len(list2) != 0 {
		t.Fatalf("keys created by refused posts: %d (%v)", len(list2), err)
	}
}

func TestTenantsAreApart(t *testing.T) {
	f := newFixture(t)
	if err := f.admin.Create(context.Background(), "globex", "bob", testPassword); err != nil {
		t.Fatal(err)
	}
	alice, bob := f.browser(), f.browser()
	alice.signIn("acme", "alice", testPassword)
	p := alice.createKey("acme key", nil)
	acmeKey := keyIDRe.FindStringSubmatch(p.body)[1]

	list := bob.signIn("globex", "bob", testPassword)
	if strings.Contains(list.body, acmeKey) || !strings.Contains(list.body, `id="no-keys"`) {
		t.Fatalf("globex's list shows acme's key:\n%s", list.body)
	}
	if p := bob.get("/keys/" + acmeKey + "/revoke"); p.status != http.StatusNotFound || strings.Contains(p.body, acmeKey) {
		t.Fatalf("globex's confirmation page for acme's key: %d", p.status)
	}
	if p := bob.post("/keys/"+acmeKey+"/revoke", url.Values{"csrf": {csrf(t, list)}}); p.status != http.StatusNotFound {
		t.Fatalf("globex revoking acme's key: %d, want 404", p.status)
	}
	k, err := f.keys.Get(context.Background(), "acme", acmeKey)
	if err != nil || k.GetRevokeTime() != nil {
		t.Fatalf("acme's key after globex's attempt: %v, %v", k, err)
	}
	// Alice's password does not open globex.
	if p := f.browser().signIn("globex", "alice", testPassword); p.status != http.StatusUnauthorized {
		t.Fatalf("alice at globex: %d, want 401", p.status)
	}
}

func TestSignInFailuresAreThrottled(t *testing.T) {
	f := newFixture(t)
	b := f.browser()
	unknown := f.browser().signIn("acme", "nobody", testPassword)
	// Names no account can have are not tracked.
	for range 2 * throttleFailures {
		f.browser().signIn("acme", strings.Repeat("x", 1000), "wrong")
	}
	if n := len(f.srv.Config.Handler.(*Server).throttle.entries); n != 1 {
		t.Fatalf("throttle entries: %d, want 1 (nobody)", n)
	}
	for i := range throttleFailures {
		p := b.signIn("acme", "alice", "wrong password "+string(rune('a'+i)))
		if p.status != http.StatusUnauthorized || !strings.Contains(p.body, loginFailed) {
			t.Fatalf("failure %d: %d", i+1, p.status)
		}
		// A wrong password reads exactly as an unknown account.
		if p.body != strings.Replace(unknown.body, `value="nobody"`, `value="alice"`, 1) {
			t.Fatalf("a wrong password and an unknown user answer differently:\n%s\n---\n%s", p.body, unknown.body)
		}
	}
	if p := b.signIn("acme", "alice", testPassword); p.status != http.StatusUnauthorized {
		t.Fatalf("the right password during the lock: %d, want 401", p.status)
	}
	f.clock.Advance(throttleLock)
	// Names are lower case: another case is the same account.
	if p := b.signIn("ACME", " Alice", testPassword); p.status != http.StatusOK || p.url != "/" {
		t.Fatalf("after the lock: %d at %s", p.status, p.url)
	}
}

func TestSessionEnds(t *testing.T) {
	f := newFixture(t)
	b := f.browser()
	list := b.signIn("acme", "alice", testPassword)
	var cookie *http.Cookie
	for _, c := range b.client.Jar.Cookies(mustURL(t, f.srv.URL)) {
		cookie = c
	}
	if cookie == nil || cookie.Name != "tollgate_portal" {
		t.Fatalf("cookie %v", cookie)
	}

	if p := b.post("/logout", url.Values{"csrf": {csrf(t, list)}}); p.url != "/login" {
		t.Fatalf("sign-out ends at %s", p.url)
	}
	// The old cookie, replayed, opens nothing.
	replay := f.browser()
	replay.client.Jar.SetCookies(mustURL(t, f.srv.URL), []*http.Cookie{cookie})
	if p := replay.get("/"); p.url != "/login" {
		t.Fatalf("a signed-out session's cookie reaches %s", p.url)
	}

	// A session lasts its TTL (an hour here), however it is used.
	b.signIn("acme", "alice", testPassword)
	for range 3 {
		f.clock.Advance(19 * time.Minute)
		if p := b.get("/"); p.url != "/" {
			t.Fatalf("within the TTL and the idle time: %s", p.url)
		}
	}
	f.clock.Advance(3 * time.Minute)
	if p := b.get("/"); p.url != "/login" {
		t.Fatalf("past the TTL: %s", p.url)
	}

	// And it ends after its idle time (20 minutes here) without a page.
	b.signIn("acme", "alice", testPassword)
	f.clock.Advance(19 * time.Minute)
	if p := b.get("/"); p.url != "/" {
		t.Fatalf("within the idle time: %s", p.url)
	}
	f.clock.Advance(20 * time.Minute)
	if p := b.get("/"); p.url != "/login" {
		t.Fatalf("idle for 20 minutes: %s", p.url)
	}
}

func TestPasswordChange(t *testing.T) {
	f := newFixture(t)
	b, other := f.browser(), f.browser()
	b.signIn("acme", "alice", testPassword)
	other.signIn("acme", "alice", testPassword)
	form := b.get("/account")
	token := csrf(t, form)
	const next = "a new passphrase here"
	for _, tc := range []struct {
		name                string
		current, new, again string
		status              int
	}{
		{"confirmation differs", testPassword, next, next + "x", http.StatusBadRequest},
		{"too short", testPassword, "short", "short", http.StatusBadRequest},
		{"wrong current password", "not it at all", next, next, http.StatusUnauthorized},
	} {
		p := b.post("/account/password", url.Values{"csrf": {token}, "current": {tc.current}, "new": {tc.new}, "confirm": {tc.again}})
		if p.status != tc.status || !strings.Contains(p.body, `id="error"`) {
			t.Fatalf("%s: %d\n%s", tc.name, p.status, p.body)
		}
	}
	p := b.post("/account/password", url.Values{"csrf": {token}, "current": {testPassword}, "new": {next}, "confirm": {next}})
	if p.status != http.StatusOK || !strings.Contains(p.body, `id="notice"`) {
		t.Fatalf("change: %d\n%s", p.status, p.body)
	}
	// This session goes on; the account's other session has ended.
	if p := b.get("/"); p.url != "/" {
		t.Fatalf("the changing session ends at %s", p.url)
	}
	if p := other.get("/"); p.url != "/login" {
		t.Fatalf("another session of the account reaches %s", p.url)
	}
	if p := f.browser().signIn("acme", "alice", testPassword); p.status != http.StatusUnauthorized {
		t.Fatalf("the old password: %d", p.status)
	}
	if p := f.browser().signIn("acme", "alice", next); p.url != "/" {
		t.Fatalf("the new password: %d at %s", p.status, p.url)
	}
}

// The session that changes its password goes on under a new token: the
// old cookie, if it was stolen, opens nothing afterwards.
func TestPasswordChangeRotatesTheSession(t *testing.T) {
	f := newFixture(t)
	b := f.browser()
	b.signIn("acme", "alice", testPassword)
	old := b.client.Jar.Cookies(mustURL(t, f.srv.URL))
	form := b.get("/account")
	const next = "a new passphrase here"
	p := b.post("/account/password", url.Values{"csrf": {csrf(t, form)}, "current": {testPassword}, "new": {next}, "confirm": {next}})
	if p.status != http.StatusOK || csrf(t, p) == csrf(t, form) {
		t.Fatalf("change: %d, CSRF token kept: %v", p.status, csrf(t, p) == csrf(t, form))
	}
	if p := b.get("/"); p.url != "/" {
		t.Fatalf("the changing browser ends at %s", p.url)
	}
	thief := f.browser()
	thief.client.Jar.SetCookies(mustURL(t, f.srv.URL), old)
	if p := thief.get("/"); p.url != "/login" {
		t.Fatalf("the old cookie reaches %s", p.url)
	}
}

// A session's change of its account (a new password, two-step sign-in
// set up) never undoes an operator's reset made after the session read
// the account.
func TestSessionChangeLosesToAReset(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(a *Admins, rev int64) error
		undone func(a *Admins) bool
	}{
		{"password change", func(a *Admins, rev int64) error {
			_, err := a.SetPassword(context.Background(), "acme", "alice", "the attacker's choice", rev)
			return err
		}, func(a *Admins) bool {
			ok, _, _ := a.Verify(context.Background(), "acme", "alice", "the operator's reset")
			return !ok
		}},
		{"two-step setup", func(a *Admins, rev int64) error {
			_, err := a.SetTOTP(context.Background(), "acme", "alice", "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP", rev)
			return err
		}, func(a *Admins) bool {
			on, _ := twoStepOn(a, "acme", "alice")
			return on
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			_, rev, err := f.admin.Verify(ctx, "acme", "alice", testPassword)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.admin.SetPassword(ctx, "acme", "alice", "the operator's reset", 0); err != nil {
				t.Fatal(err)
			}
			if err := tc.change(f.admin, rev); !errors.Is(err, ErrAccountChanged) {
				t.Fatalf("a change over an older revision: %v, want ErrAccountChanged", err)
			}
			if tc.undone(f.admin) {
				t.Fatal("the operator's reset was undone")
			}
		})
	}
}

// Parallel sign-ins cannot get past the throttle: each is counted when
// its check starts, so no more than throttleFailures wrong passwords are
// checked before the account locks.
func TestParallelSignInsAreThrottled(t *testing.T) {
	f := newFixture(t)
	const n = 4 * throttleFailures
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f.browser().signIn("acme", "alice", "wrong password "+strconv.Itoa(i)) })
	}
	wg.Wait()
	m := f.srv.Config.Handler.(*Server).cfg.Metrics.signIns
	if failed, throttled := testutil.ToFloat64(m.WithLabelValues("failed")), testutil.ToFloat64(m.WithLabelValues("throttled")); failed != throttleFailures || throttled != n-throttleFailures {
		t.Fatalf("%v checked and failed, %v throttled; want %d and %d", failed, throttled, throttleFailures, n-throttleFailures)
	}
}

func TestRevokedNoticeNamesOnlyAKey(t *testing.T) {
	f := newFixture(t)
	b := f.browser()
	b.signIn("acme", "alice", testPassword)
	if p := b.get("/?revoked=" + url.QueryEscape("everything, call 555-0100")); strings.Contains(p.body, `id="notice"`) {
		t.Fatalf("the list announces a revocation of anything:\n%s", p.body)
	}
	if p := b.get("/?revoked=key_abc"); !strings.Contains(p.body, `id="notice"`) {
		t.Fatal("no notice for a key id")
	}
}

// An operator's change of an account (a password reset, its removal) ends
// its sessions at their next page.
func TestAccountChangesEndSessions(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := f.browser()
	b.signIn("acme", "alice", testPassword)
	if _, err := f.admin.SetPassword(ctx, "acme", "alice", "reset by the operator", 0); err != nil {
		t.Fatal(err)
	}
	if p := b.get("/"); p.url != "/login" {
		t.Fatalf("after a reset: %s", p.url)
	}
	b.signIn("acme", "alice", "reset by the operator")
	if p := b.get("/"); p.url != "/" {
		t.Fatalf("signed in again: %s", p.url)
	}
	if err := f.admin.Remove(ctx, "acme", "alice"); err != nil {
		t.Fatal(err)
	}
	if p := b.get("/"); p.url != "/login" {
		t.Fatalf("after removal: %s", p.url)
	}
	if err := f.admin.Remove(ctx, "acme", "alice"); !errors.Is(err, ErrNoAdmin) {
		t.Fatalf("removing twice: %v", err)
	}
	if _, err := f.admin.SetPassword(ctx, "acme", "nobody", "a password of length", 0); !errors.Is(err, ErrNoAdmin) {
		t.Fatalf("resetting nobody: %v", err)
	}
}

func TestCookieAndHeaders(t *testing.T) {
	f := newFixture(t)
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+"/login",
		strings.NewReader(url.Values{"tenant": {"acme"}, "user": {"Alice "}, "password": {testPassword}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", resp.StatusCode)
	}
	set := resp.Header.Get("Set-Cookie")
	for _, want := range []string{"HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=3600"} {
		if !strings.Contains(set, want) {
			t.Errorf("Set-Cookie %q lacks %s", set, want)
		}
	}
	for name, want := range map[string]string{
		"Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
		"X-Frame-Options":         "DENY",
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "same-origin",
		"Cache-Control":           "no-store",
	} {
		if got := resp.Header.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	b := f.browser()
	if p := b.get("/nowhere"); p.status != http.StatusNotFound || !strings.Contains(p.body, "no such page") {
		t.Errorf("unknown page: %d", p.status)
	}
	if p := b.get("/static/portal.css"); p.status != http.StatusOK || p.header.Get("Content-Type") != "text/css; charset=utf-8" || !strings.Contains(p.body, "font-family") {
		t.Errorf("stylesheet: %d %s", p.status, p.header.Get("Content-Type"))
	}
	big := b.post("/login", url.Values{"tenant": {strings.Repeat("a", maxFormBytes)}})
	if big.status != http.StatusBadRequest {
		t.Errorf("an oversized form: %d, want 400", big.status)
	}
}

func TestAdmins(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.admin.Create(ctx, "acme", "alice", "another password"); !errors.Is(err, ErrAdminExists) {
		t.Errorf("a second alice: %v, want ErrAdminExists", err)
	}
	if ok, _, err := f.admin.Verify(ctx, "acme", "alice", testPassword); !ok || err != nil {
		t.Errorf("alice's own password: %v, %v", ok, err)
	}
	for _, tc := range []struct{ tenant, user, password string }{
		{"ACME", "bob", testPassword},
		{"acme", "Bob", testPassword},
		{"acme", "bob/x", testPassword},
		{"acme", "bob", "short"},
		{"acme", "bob", strings.Repeat("p", MaxPasswordLen+1)},
	} {
		if err := f.admin.Create(ctx, tc.tenant, tc.user, tc.password); !errors.Is(err, ErrInvalid) {
			t.Errorf("Create(%q, %q, %d bytes): %v, want ErrInvalid", tc.tenant, tc.user, len(tc.password), err)
		}
	}
}

func TestPasswordHash(t *testing.T) {
	h := hashPassword("s3cret password")
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("hash %q", h)
	}
	if h == hashPassword("s3cret password") {
		t.Fatal("two hashes of one password are equal: no salt")
	}
	for pw, want := range map[string]bool{"s3cret password": true, "s3cret passworD": false, "": false} {
		if ok, err := checkPassword(h, pw); ok != want || err != nil {
			t.Errorf("check %q: %v, %v", pw, ok, err)
		}
	}
	for _, bad := range []string{"", "$argon2i$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA", "$argon2id$v=19$m=0,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA", h + "$"} {
		if _, err := checkPassword(bad, "x"); !errors.Is(err, errBadHash) {
			t.Errorf("check against %q: %v, want errBadHash", bad, err)
		}
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Behind a TLS proxy, forms come from the public origin and the cookie is
// Secure and __Host- prefixed, although the portal itself speaks HTTP.
func TestBehindAProxy(t *testing.T) {
	const public = "https://portal.example.com"
	f := newFixtureWith(t, func(c *Config) { c.PublicOrigin = public + "/" })
	form := url.Values{"tenant": {"acme"}, "user": {"alice"}, "password": {testPassword}}
	for origin, want := range map[string]int{public: http.StatusSeeOther, f.srv.URL: http.StatusForbidden, "http://portal.example.com": http.StatusForbidden} {
		req, err := http.NewRequest(http.MethodPost, f.srv.URL+"/login", strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("a sign-in from %s: %d, want %d", origin, resp.StatusCode, want)
		}
		if want == http.StatusSeeOther {
			set := resp.Header.Get("Set-Cookie")
			if !strings.HasPrefix(set, "__Host-tollgate_portal=") || !strings.Contains(set, "; Secure") || resp.Header.Get("Strict-Transport-Security") == "" {
				t.Errorf("Set-Cookie %q, HSTS %q", set, resp.Header.Get("Strict-Transport-Security"))
			}
		}
	}
	for _, bad := range []string{"portal.example.com", "ftp://portal.example.com", "https://portal.example.com/portal", "https://"} {
		if CheckPublicOrigin(bad) == nil {
			t.Errorf("public origin %q accepted", bad)
		}
	}
}

// One address gets SignInsPerAddress sign-ins at once, then one more every
// minute / SignInsPerAddress, whatever accounts it names; behind a proxy
// the address is the one the proxy appends to X-Forwarded-For.
func TestSignInsPerAddress(t *testing.T) {
	f := newFixtureWith(t, func(c *Config) {
		c.SignInsPerAddress = DefaultSignInsPerAddress
		c.PublicOrigin = "https://portal.example.com"
	})
	signIn := func(xff, user string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, f.srv.URL+"/login",
			strings.NewReader(url.Values{"tenant": {"acme"}, "user": {user}, "password": {"wrong password"}}.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-For", xff)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range DefaultSignInsPerAddress {
		if st := signIn("192.0.2.1, 203.0.113.7", "user"+strconv.Itoa(i)); st != http.StatusUnauthorized {
			t.Fatalf("sign-in %d: %d, want 401 (checked)", i+1, st)
		}
	}
	if st := signIn("192.0.2.99, 203.0.113.7", "another"); st != http.StatusTooManyRequests {
		t.Fatalf("one more from the address (a client-set first entry changes nothing): %d, want 429", st)
	}
	if st := signIn("203.0.113.8", "another"); st != http.StatusUnauthorized {
		t.Fatalf("another address: %d, want 401 (checked)", st)
	}
	f.clock.Advance(time.Minute / DefaultSignInsPerAddress)
	if st := signIn("203.0.113.7", "another"); st != http.StatusUnauthorized {
		t.Fatalf("after a refill: %d, want 401 (checked)", st)
	}
	if st := signIn("203.0.113.7", "another"); st != http.StatusTooManyRequests {
		t.Fatalf("right after: %d, want 429", st)
	}
}

// The list shows keysPerPage keys a page, with a link to the next.
func TestKeyListPages(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for i := range keysPerPage + 3 {
		if _, _, err := f.keys.Create(ctx, keys.Spec{TenantID: "acme", Label: "k" + strconv.Itoa(i), AllModels: true}); err != nil {
			t.Fatal(err)
		}
	}
	b := f.browser()
	first := b.signIn("acme", "alice", testPassword)
	if n := strings.Count(first.body, "<tr data-key-id="); n != keysPerPage {
		t.Fatalf("first page: %d keys, want %d", n, keysPerPage)
	}
	m := regexp.MustCompile(`href="/\?page=([^"]+)" id="next-page"`).FindStringSubmatch(first.body)
	if m == nil {
		t.Fatal("no link to the next page")
	}
	second := b.get("/?page=" + html.UnescapeString(m[1]))
	if n := strings.Count(second.body, "<tr data-key-id="); n != 3 || strings.Contains(second.body, `id="next-page"`) {
		t.Fatalf("second page: %d keys (want 3), next link: %v", n, strings.Contains(second.body, `id="next-page"`))
	}
	if p := b.get("/?page=not-a-token"); p.status != http.StatusBadRequest {
		t.Fatalf("a made-up page token: %d, want 400", p.status)
	}
}

// A revocation posted twice (a reload, a second tab) revokes once: the
// second is neither logged nor counted as one.
func TestRevokeTwiceCountsOnce(t *testing.T) {
	f := newFixture(t)
	b := f.browser()
	b.signIn("acme", "alice", testPassword)
	id := keyIDRe.FindStringSubmatch(b.createKey("twice", nil).body)[1]
	confirm := b.get("/keys/" + id + "/revoke")
	for range 2 {
		f.clock.Advance(time.Second)
		if p := b.post("/keys/"+id+"/revoke", url.Values{"csrf": {csrf(t, confirm)}}); p.status != http.StatusOK {
			t.Fatalf("revoke: %d", p.status)
		}
	}
	if n := testutil.ToFloat64(f.srv.Config.Handler.(*Server).cfg.Metrics.keyOps.WithLabelValues("revoke")); n != 1 {
		t.Fatalf("%v revocations counted, want 1", n)
	}
}

// Served over plain HTTP without a public origin, the portal answers only
// requests naming a loopback host: a page of another site whose name was
// made to resolve to 127.0.0.1 (DNS rebinding) sends its own Host and a
// matching Origin, which would otherwise pass as the portal's own forms.
func TestRefusesRebindingHosts(t *testing.T) {
	f := newFixture(t)
	_, port, err := net.SplitHostPort(strings.TrimPrefix(f.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"tenant": {"acme"}, "user": {"alice"}, "password": {testPassword}}
	for host, want := range map[string]int{
		"rebind.attacker.example:" + port: http.StatusMisdirectedRequest,
		"10.0.0.1:" + port:                http.StatusMisdirectedRequest,
		"localhost:" + port:               http.StatusSeeOther,
		"127.0.0.1:" + port:               http.StatusSeeOther,
		"[::1]:" + port:                   http.StatusSeeOther,
	} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			req, err := http.NewRequest(method, f.srv.URL+"/login", strings.NewReader(form.Encode()))
			if err != nil {
				t.Fatal(err)
			}
			req.Host = host
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", "http://"+host)
			resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			expect := want
			if method == http.MethodGet && want == http.StatusSeeOther {
				expect = http.StatusOK // the sign-in page
			}
			if resp.StatusCode != expect {
				t.Errorf("%s /login with Host %s: %d, want %d", method, host, resp.StatusCode, expect)
			}
			if resp.StatusCode == http.StatusMisdirectedRequest && resp.Header.Get("Set-Cookie") != "" {
				t.Errorf("Host %s got a cookie", host)
			}
		}
	}
}
