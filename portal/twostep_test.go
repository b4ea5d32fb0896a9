package portal

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// RFC 6238's SHA-1 test vectors (its appendix B), cut to six digits: the
// secret is the ASCII "12345678901234567890".
func TestCodeStepVectors(t *testing.T) {
	const secret = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"
	for _, tc := range []struct {
		unix int64
		code string
	}{
		{59, "287082"},
		{1111111109, "081804"},
		{1111111111, "050471"},
		{1234567890, "005924"},
		{2000000000, "279037"},
		{20000000000, "353130"},
	} {
		step, ok := codeStep(secret, tc.code, time.Unix(tc.unix, 0))
		if !ok || step != tc.unix/30 {
			t.Errorf("T=%d %s: step %d, %v; want %d", tc.unix, tc.code, step, ok, tc.unix/30)
		}
	}
	// A code is right one period either side of its own, and no further.
	at := time.Unix(1111111080, 0) // the start of the period of 081804
	for _, tc := range []struct {
		offset time.Duration
		ok     bool
	}{{-31 * time.Second, false}, {-30 * time.Second, true}, {0, true}, {59 * time.Second, true}, {60 * time.Second, false}} {
		if _, ok := codeStep(secret, "081804", at.Add(tc.offset)); ok != tc.ok {
			t.Errorf("%v from its time: %v, want %v", tc.offset, ok, tc.ok)
		}
	}
	for _, code := range []string{"", "28708", "2870820", "28708a", "000000"} {
		if _, ok := codeStep(secret, code, at); ok {
			t.Errorf("code %q is right", code)
		}
	}
}

func TestNormalizeCode(t *testing.T) {
	for in, want := range map[string]string{
		"123456": "123456", "123 456": "123456", " 123-456 ": "123456",
		"12345x": "", "１２３４５６": "", "1234567890": "",
	} {
		if got := normalizeCode(in); got != want {
			t.Errorf("normalizeCode(%q) = %q, want %q", in, got, want)
		}
	}
}

var totpSecretRe = regexp.MustCompile(`<code id="totp-secret">([A-Z2-7 ]+)</code>`)

// code is the code of secret (as the page shows it) at t, as an
// authenticator app makes it.
func code(t *testing.T, secret string, at time.Time) string {
	t.Helper()
	c, err := totp.GenerateCodeCustom(strings.ReplaceAll(secret, " ", ""), at, totp.ValidateOpts{Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// turnOn sets two-step sign-in up from b's session and returns the secret.
func (b *browser) turnOn(t *testing.T) string {
	t.Helper()
	p := b.get("/account/two-step")
	m := totpSecretRe.FindStringSubmatch(p.body)
	if p.status != http.StatusOK || m == nil {
		t.Fatalf("setup page: %d\n%s", p.status, p.body)
	}
	on := b.post("/account/two-step/on", url.Values{"csrf": {csrf(t, p)}, "code": {code(t, m[1], b.f.clock.Now())}, "current": {testPassword}})
	if on.status != http.StatusOK || !strings.Contains(on.body, `id="notice"`) {
		t.Fatalf("turn on: %d\n%s", on.status, on.body)
	}
	return m[1]
}

func (b *browser) signInWithCode(tenant, user, password, code string) page {
	b.f.t.Helper()
	return b.post("/login", url.Values{"tenant": {tenant}, "user": {user}, "password": {password}, "code": {code}})
}

func TestTwoStepLifecycle(t *testing.T) {
	f := newFixture(t)
	signIns := f.srv.Config.Handler.(*Server).cfg.Metrics.signIns
	b, other := f.browser(), f.browser()
	b.signIn("acme", "alice", testPassword)
	other.signIn("acme", "alice", testPassword)

	setup := b.get("/account/two-step")
	m := totpSecretRe.FindStringSubmatch(setup.body)
	if m == nil {
		t.Fatalf("no secret on the setup page:\n%s", setup.body)
	}
	secret := m[1]
	if again := b.get("/account/two-step"); !strings.Contains(again.body, secret) {
		t.Fatal("a reload shows another secret: the app would hold the wrong one")
	}
	if p := other.get("/account/two-step"); strings.Contains(p.body, secret) {
		t.Fatal("another session is shown this session's secret")
	}
	qr := b.get("/account/two-step/qr.png")
	img, err := png.Decode(bytes.NewReader([]byte(qr.body)))
	if qr.status != http.StatusOK || qr.header.Get("Content-Type") != "image/png" || err != nil || img.Bounds().Dx() < 200 {
		t.Fatalf("QR code: %d %s %v", qr.status, qr.header.Get("Content-Type"), err)
	}
	if qr.header.Get("Cache-Control") != "no-store" {
		t.Fatal("the QR code of a secret may be cached")
	}

	token := csrf(t, setup)
	now := f.clock.Now()
	for _, tc := range []struct {
		name, code, password string
		status               int
	}{
		{"wrong code", "000000", testPassword, http.StatusBadRequest},
		{"a code of another time", code(t, secret, now.Add(-2*time.Minute)), testPassword, http.StatusBadRequest},
		{"wrong password", code(t, secret, now), "not the password", http.StatusUnauthorized},
	} {
		p := b.post("/account/two-step/on", url.Values{"csrf": {token}, "code": {tc.code}, "current": {tc.password}})
		if p.status != tc.status || !strings.Contains(p.body, `id="error"`) {
			t.Fatalf("%s: %d\n%s", tc.name, p.status, p.body)
		}
	}
	enableCode := code(t, secret, now)
	p := b.post("/account/two-step/on", url.Values{"csrf": {token}, "code": {enableCode[:3] + " " + enableCode[3:]}, "current": {testPassword}})
	if p.status != http.StatusOK || !strings.Contains(p.body, "is <b>on</b>") || csrf(t, p) == token {
		t.Fatalf("turn on: %d, CSRF token kept: %v\n%s", p.status, csrf(t, p) == token, p.body)
	}
	if p := b.get("/account"); !strings.Contains(p.body, "Two-step sign-in is <b>on</b>") {
		t.Fatalf("the account page after turning on:\n%s", p.body)
	}
	if p := other.get("/"); p.url != "/login" {
		t.Fatalf("another session of the account goes on at %s", p.url)
	}
	if p := b.get("/account/two-step/qr.png"); p.status != http.StatusNotFound {
		t.Fatalf("the secret's QR code after setup: %d", p.status)
	}

	// Signing in now takes the code as well; every failure reads the same.
	for _, tc := range []struct {
		name, password, code, outcome string
	}{
		{"no code", testPassword, "", "wrong_code"},
		{"wrong code", testPassword, "123456", "wrong_code"},
		{"the code that turned it on", testPassword, enableCode, "code_reused"},
		{"wrong password, right code", "not the password", code(t, secret, now), "failed"},
	} {
		before := testutil.ToFloat64(signIns.WithLabelValues(tc.outcome))
		p := f.browser().signInWithCode("acme", "alice", tc.password, tc.code)
		if p.status != http.StatusUnauthorized || !strings.Contains(p.body, "Sign-in failed.") {
			t.Fatalf("%s: %d at %s", tc.name, p.status, p.url)
		}
		if testutil.ToFloat64(signIns.WithLabelValues(tc.outcome)) != before+1 {
			t.Errorf("%s: not counted as %s", tc.name, tc.outcome)
		}
	}
	// Five failures in a row (the wrong password at setup among them: a
	// right password later does not clear it) lock the account for a
	// minute.
	if p := f.browser().signInWithCode("acme", "alice", testPassword, code(t, secret, f.clock.Now().Add(30*time.Second))); p.status != http.StatusUnauthorized {
		t.Fatalf("a right code while locked: %d at %s", p.status, p.url)
	}
	f.clock.Advance(time.Minute)
	next := code(t, secret, f.clock.Now())
	if p := f.browser().signInWithCode("acme", "alice", testPassword, next); p.url != "/" {
		t.Fatalf("the right code: %d at %s", p.status, p.url)
	}
	if p := f.browser().signInWithCode("acme", "alice", testPassword, next); p.status != http.StatusUnauthorized {
		t.Fatalf("the same code again: %d at %s", p.status, p.url)
	}

	// Turning it off takes a fresh code and the password.
	page := b.get("/account/two-step")
	token = csrf(t, page)
	if p := b.post("/account/two-step/off", url.Values{"csrf": {token}, "code": {next}, "current": {testPassword}}); p.status != http.StatusUnauthorized {
		t.Fatalf("turn off with a used code: %d", p.status)
	}
	f.clock.Advance(30 * time.Second)
	off := code(t, secret, f.clock.Now())
	if p := b.post("/account/two-step/off", url.Values{"csrf": {token}, "code": {off}, "current": {"not the password"}}); p.status != http.StatusUnauthorized {
		t.Fatalf("turn off with a wrong password: %d", p.status)
	}
	// The wrong password came after the code was checked: that code is
	// spent, so the next one turns it off.
	f.clock.Advance(30 * time.Second)
	p = b.post("/account/two-step/off", url.Values{"csrf": {token}, "code": {code(t, secret, f.clock.Now())}, "current": {testPassword}})
	if p.status != http.StatusOK || !strings.Contains(p.body, "is <b>off</b>") {
		t.Fatalf("turn off: %d\n%s", p.status, p.body)
	}
	if p := f.browser().signIn("acme", "alice", testPassword); p.url != "/" {
		t.Fatalf("sign-in without a code once it is off: %d at %s", p.status, p.url)
	}
	if n := testutil.ToFloat64(f.srv.Config.Handler.(*Server).cfg.Metrics.twoStepChanges.WithLabelValues("on")); n != 1 {
		t.Errorf("turned on %v times", n)
	}
}

// A portal that requires two-step sign-in lets an account without it
// only set it up; with it, everything, but never turning it off.
func TestTwoStepRequired(t *testing.T) {
	f := newFixtureWith(t, func(c *Config) { c.RequireTwoStep = true })
	b := f.browser()
	if p := b.signIn("acme", "alice", testPassword); p.url != "/account/two-step" || !strings.Contains(p.body, "requires it") {
		t.Fatalf("after sign-in: %d at %s", p.status, p.url)
	}
	for _, path := range []string{"/", "/keys/new"} {
		if p := b.get(path); p.url != "/account/two-step" {
			t.Fatalf("%s reaches %s", path, p.url)
		}
	}
	setup := b.get("/account/two-step")
	if p := b.post("/keys", url.Values{"csrf": {csrf(t, setup)}, "label": {"k"}, "models": {"all"}, "rpm": {"0"}, "tpd": {"0"}}); p.status != http.StatusForbidden {
		t.Fatalf("creating a key without two-step: %d", p.status)
	}
	if p := b.get("/account"); p.status != http.StatusOK || p.url != "/account" {
		t.Fatalf("the account page: %d at %s", p.status, p.url)
	}
	secret := b.turnOn(t)
	if p := b.createKey("after setup", nil); p.status != http.StatusCreated {
		t.Fatalf("creating a key with two-step: %d", p.status)
	}
	page := b.get("/account/two-step")
	if strings.Contains(page.body, "/account/two-step/off") {
		t.Fatal("the page offers to turn off what the portal requires")
	}
	f.clock.Advance(30 * time.Second)
	p := b.post("/account/two-step/off", url.Values{"csrf": {csrf(t, page)}, "code": {code(t, secret, f.clock.Now())}, "current": {testPassword}})
	if p.status != http.StatusForbidden {
		t.Fatalf("turning it off: %d", p.status)
	}
	if on, err := twoStepOn(f.admin, "acme", "alice"); !on || err != nil {
		t.Fatalf("two-step after the refused turn-off: %v, %v", on, err)
	}
}

// An operator's reset (a lost phone) turns two-step sign-in off and ends
// the account's sessions; the account then signs in with its password.
func TestTwoStepReset(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := f.browser()
	b.signIn("acme", "alice", testPassword)
	b.turnOn(t)
	if list, err := f.admin.List(ctx, "acme"); err != nil || len(list) != 1 || !list[0].TwoStep {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if _, err := f.admin.SetTOTP(ctx, "acme", "alice", "", 0); err != nil {
		t.Fatal(err)
	}
	if p := b.get("/"); p.url != "/login" {
		t.Fatalf("a session after the reset reaches %s", p.url)
	}
	if p := f.browser().signIn("acme", "alice", testPassword); p.url != "/" {
		t.Fatalf("sign-in after the reset: %d at %s", p.status, p.url)
	}
	if err := f.admin.CheckCode(ctx, "acme", "alice", "123456", f.clock.Now()); !errors.Is(err, errNoTwoStep) {
		t.Fatalf("a code for an account without two-step: %v", err)
	}
	if _, err := f.admin.SetTOTP(ctx, "acme", "nobody", "", 0); !errors.Is(err, ErrNoAdmin) {
		t.Fatalf("resetting nobody: %v", err)
	}
}

// Wrong codes count against the account's throttle, checked before the
// code: a locked account answers a right code as it answers a wrong one,
// and does not spend it. A right password (a password change) does not
// clear the count, since it says nothing about the phone.
func TestTwoStepCodeGuessesAreThrottled(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := f.browser()
	b.signIn("acme", "alice", testPassword)
	secret := b.turnOn(t)
	f.clock.Advance(30 * time.Second)
	form := b.get("/account/two-step")
	guess := func(code string) page {
		return b.post("/account/two-step/off", url.Values{"csrf": {csrf(t, form)}, "code": {code}, "current": {testPassword}})
	}
	for i := range 4 {
		if p := guess("000000"); p.status != http.StatusUnauthorized {
			t.Fatalf("wrong code %d: %d", i, p.status)
		}
	}
	// A password change with the right code and password.
	account := b.get("/account")
	const next = "a new passphrase here"
	p := b.post("/account/password", url.Values{"csrf": {csrf(t, account)}, "code": {code(t, secret, f.clock.Now())},
		"current": {testPassword}, "new": {next}, "confirm": {next}})
	if p.status != http.StatusOK {
		t.Fatalf("password change: %d\n%s", p.status, p.body)
	}
	if !strings.Contains(p.body, "Two-step sign-in is <b>on</b>") {
		t.Fatalf("the account page after a password change says two-step is off:\n%s", p.body)
	}
	form = b.get("/account/two-step")
	if p := guess("000000"); p.status != http.StatusUnauthorized {
		t.Fatalf("the fifth wrong code: %d", p.status)
	}
	f.clock.Advance(30 * time.Second)
	right := code(t, secret, f.clock.Now())
	locked, wrong := guess(right), guess("000000")
	if locked.status != http.StatusTooManyRequests || locked.body != wrong.body {
		t.Fatalf("a right code while locked: %d, same page as a wrong one: %v", locked.status, locked.body == wrong.body)
	}
	// The right code was not checked, so not spent: the last step
	// accepted is still the password change's.
	resp, err := f.admin.cli.Get(ctx, totpStepKey("acme", "alice"))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatal(resp, err)
	}
	if got, want := string(resp.Kvs[0].Value), strconv.FormatInt(f.clock.Now().Add(-30*time.Second).Unix()/30, 10); got != want {
		t.Fatalf("last step accepted %s, want %s (the password change's)", got, want)
	}
}

// With two-step on, a password change takes a code too: a stolen cookie
// and a known password must not lock the owner out.
func TestTwoStepPasswordChangeTakesACode(t *testing.T) {
	f := newFixture(t)
	b := f.browser()
	b.signIn("acme", "alice", testPassword)
	b.turnOn(t)
	account := b.get("/account")
	if !strings.Contains(account.body, `name="code"`) {
		t.Fatal("the password form asks for no code")
	}
	const next = "a new passphrase here"
	for _, c := range []string{"", "000000"} {
		p := b.post("/account/password", url.Values{"csrf": {csrf(t, account)}, "code": {c}, "current": {testPassword}, "new": {next}, "confirm": {next}})
		if p.status != http.StatusUnauthorized || !strings.Contains(p.body, `id="error"`) {
			t.Fatalf("code %q: %d", c, p.status)
		}
	}
	if ok, _, _ := f.admin.Verify(context.Background(), "acme", "alice", testPassword); !ok {
		t.Fatal("the password changed without a code")
	}
}

// Two tabs opening the setup page at once are shown the same secret:
// the one the session keeps.
func TestTwoStepSetupInTwoTabs(t *testing.T) {
	f := newFixture(t)
	b := f.browser()
	b.signIn("acme", "alice", testPassword)
	for round := range 5 {
		var wg sync.WaitGroup
		pages := make([]string, 2)
		for i := range pages {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, err := http.NewRequest(http.MethodGet, f.srv.URL+"/account/two-step", nil)
				if err != nil {
					t.Error(err)
					return
				}
				resp, err := b.client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				if m := totpSecretRe.FindSubmatch(body); m != nil {
					pages[i] = string(m[1])
				}
			}()
		}
		wg.Wait()
		kept := totpSecretRe.FindStringSubmatch(b.get("/account/two-step").body)[1]
		if pages[0] != kept || pages[1] != kept {
			t.Fatalf("round %d: the tabs show %q and %q, the session keeps %q", round, pages[0], pages[1], kept)
		}
		// A new session for the next round, so that it sets up anew.
		b = f.browser()
		b.signIn("acme", "alice", testPassword)
	}
}

// twoStepOn reports whether tenant's administrator user has two-step
// sign-in, as list-admins shows it.
func twoStepOn(a *Admins, tenant, user string) (bool, error) {
	list, err := a.List(context.Background(), tenant)
	for _, ad := range list {
		if ad.User == user {
			return ad.TwoStep, err
		}
	}
	return false, err
}
