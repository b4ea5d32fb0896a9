package portal

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	keysv1 "github.com/tollgate-dev/tollgate/gen/tollgate/keys/v1"
	"github.com/tollgate-dev/tollgate/internal/ids"
	"github.com/tollgate-dev/tollgate/internal/netaddr"
	"github.com/tollgate-dev/tollgate/server/keys"
)

// Config is what a portal needs.
type Config struct {
	Admins   *Admins
	Sessions *Sessions
	Keys     *keys.Store
	// Models lists the models being served, offered as boxes to tick when
	// a key allows only some; nil offers none (ids can still be typed).
	Models func(context.Context) ([]string, error)
	// Secure is set when the portal is served over TLS: its cookie is then
	// __Host- prefixed and Secure.
	Secure bool
	// PublicOrigin is the scheme and host browsers reach the portal at
	// when it is behind a reverse proxy ("https://portal.example.com"):
	// forms must come from it, and an https origin makes the cookie
	// Secure as TLS does. Empty: the portal's own scheme and Host header.
	PublicOrigin string
	// MaxPasswordChecks bounds the password hashes computed at once (each
	// takes 19 MiB and tens of milliseconds); 0 means 2.
	MaxPasswordChecks int
	// SignInsPerAddress is how many sign-ins one client address may
	// start at once, and in a minute (0: DefaultSignInsPerAddress).
	SignInsPerAddress int
	// RequireTwoStep makes two-step sign-in compulsory: a signed-in
	// administrator without it reaches only the page that sets it up
	// (and signs out), and cannot turn it off.
	RequireTwoStep bool
	Now            func() time.Time
	Logger         *slog.Logger
	// Metrics, when set, counts sign-ins and key operations.
	Metrics *Metrics
}

// Server serves the portal's pages. Build it with New.
type Server struct {
	cfg      Config
	mux      *http.ServeMux
	throttle *throttle
	addrs    *addrLimiter
	checks   chan struct{}
	pages    *pages
}

// maxFormBytes bounds a posted form.
const maxFormBytes = 64 << 10

// requestTimeout bounds the work of one page, etcd included.
const requestTimeout = 10 * time.Second

// New returns the portal for cfg.
func New(cfg Config) *Server {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if o, err := canonicalOrigin(cfg.PublicOrigin); err == nil {
		cfg.PublicOrigin = o
	}
	if cfg.MaxPasswordChecks <= 0 {
		cfg.MaxPasswordChecks = 2
	}
	s := &Server{
		cfg:      cfg,
		mux:      http.NewServeMux(),
		throttle: newThrottle(),
		addrs:    newAddrLimiter(cfg.SignInsPerAddress),
		checks:   make(chan struct{}, cfg.MaxPasswordChecks),
		pages:    loadPages(),
	}
	s.mux.HandleFunc("GET /static/portal.css", s.static("text/css; charset=utf-8", stylesheet))
	s.mux.HandleFunc("GET /favicon.ico", s.static("image/svg+xml", favicon))
	s.mux.HandleFunc("GET /login", s.loginPage)
	s.mux.HandleFunc("POST /login", s.login)
	s.mux.HandleFunc("POST /logout", s.signedIn(s.logout))
	s.mux.HandleFunc("GET /{$}", s.signedIn(s.listKeys))
	s.mux.HandleFunc("GET /keys/new", s.signedIn(s.newKey))
	s.mux.HandleFunc("POST /keys", s.signedIn(s.createKey))
	s.mux.HandleFunc("GET /keys/{key_id}/revoke", s.signedIn(s.confirmRevoke))
	s.mux.HandleFunc("POST /keys/{key_id}/revoke", s.signedIn(s.revokeKey))
	s.mux.HandleFunc("GET /account", s.signedIn(s.accountPage))
	s.mux.HandleFunc("POST /account/password", s.signedIn(s.changePassword))
	s.mux.HandleFunc("GET /account/two-step", s.signedIn(s.twoStepPage))
	s.mux.HandleFunc("GET /account/two-step/qr.png", s.signedIn(s.twoStepQR))
	s.mux.HandleFunc("POST /account/two-step/on", s.signedIn(s.twoStepOn))
	s.mux.HandleFunc("POST /account/two-step/off", s.signedIn(s.twoStepOff))
	s.mux.HandleFunc("/", s.notFound)
	return s
}

// cookieName is the session cookie's name: __Host- prefixed over TLS, so
// that the browser accepts it only as Secure, host-only and for path /.
func (s *Server) cookieName() string {
	if s.secure() {
		return "__Host-tollgate_portal"
	}
	return "tollgate_portal"
}

// secure reports whether browsers reach the portal over HTTPS: its own
// TLS, or a proxy's at an https PublicOrigin.
func (s *Server) secure() bool {
	return s.cfg.Secure || strings.HasPrefix(s.cfg.PublicOrigin, "https://")
}

// CheckPublicOrigin checks a Config.PublicOrigin: http or https, a host,
// an optional port, nothing else.
func CheckPublicOrigin(origin string) error {
	_, err := canonicalOrigin(origin)
	return err
}

// canonicalOrigin is origin as a browser sends it in an Origin header:
// scheme and host in lower case, no default port, no trailing slash.
func canonicalOrigin(origin string) (string, error) {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.Opaque != "" ||
		u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", fmt.Errorf("portal: public origin %q: want scheme://host[:port], e.g. https://portal.example.com", origin)
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port == "" || scheme == "https" && port == "443" || scheme == "http" && port == "80" {
		return scheme + "://" + host, nil
	}
	return scheme + "://" + host + ":" + port, nil
}

// ServeHTTP sets the headers every page carries, bounds the request, and
// refuses a form posted from another origin.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: under no-referrer browsers send
	// "Origin: null" with the portal's own forms, which sameOrigin must
	// refuse.
	h.Set("Referrer-Policy", "same-origin")
	// No page may be kept: one of them shows a secret, the others a
	// tenant's keys.
	h.Set("Cache-Control", "no-store")
	if s.secure() {
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
	if !s.hostAllowed(r.Host) {
		s.fail(w, r, http.StatusMisdirectedRequest, "This portal answers at its loopback address only.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	r = r.WithContext(ctx)
	if r.Method == http.MethodPost {
		if !s.sameOrigin(r) {
			s.fail(w, r, http.StatusForbidden, "This form was sent from another site.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			s.fail(w, r, http.StatusBadRequest, "The form could not be read.")
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// hostAllowed reports whether a request named a host the portal answers
// at. Served over plain HTTP without a public origin, the portal listens
// on loopback only, so its pages are reached as localhost or a loopback
// IP: any other Host is a page on another site that had its name resolve
// to 127.0.0.1 (DNS rebinding), whose forms would otherwise pass
// sameOrigin, Origin and Host agreeing. Over TLS the certificate does not
// name such a host, and behind a proxy the public origin is checked.
func (s *Server) hostAllowed(hostport string) bool {
	if s.cfg.Secure || s.cfg.PublicOrigin != "" {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return netaddr.IsLoopbackHost(host)
}

// sameOrigin reports whether a POST comes from the portal's own pages:
// its Origin header, which browsers send with every form post, names
// this host. A request without one (not a browser's) is let through; the
// session's CSRF token still guards it.
func (s *Server) sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if s.cfg.PublicOrigin != "" {
		return origin == s.cfg.PublicOrigin
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	scheme := "http"
	if s.cfg.Secure {
		scheme = "https"
	}
	return u.Scheme == scheme && u.Host == r.Host
}

// signedIn runs h for a request with a live session whose form, if any,
// carries the session's CSRF token; a GET without a session goes to the
// sign-in page.
func (s *Server) signedIn(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess, err := s.session(r)
		switch {
		case errors.Is(err, errNoSession):
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/login", http.StatusSeeOther)
				return
			}
			s.fail(w, r, http.StatusUnauthorized, "Your session has ended. Sign in again.")
			return
		case err != nil:
			s.unavailable(w, r, err)
			return
		}
		if r.Method == http.MethodPost &&
			subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(sess.CSRF)) != 1 {
			s.fail(w, r, http.StatusForbidden, "This form is out of date. Go back, reload the page and try again.")
			return
		}
		if s.cfg.RequireTwoStep && !sess.twoStep && !twoStepExempt(r) {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/account/two-step", http.StatusSeeOther)
				return
			}
			s.fail(w, r, http.StatusForbidden, "This portal requires two-step sign-in. Set it up first.")
			return
		}
		h(w, r, sess)
	}
}

func (s *Server) session(r *http.Request) (*session, error) {
	c, err := r.Cookie(s.cookieName())
	if err != nil {
		return nil, errNoSession
	}
	return s.cfg.Sessions.Get(r.Context(), c.Value)
}

func (s *Server) setCookie(w http.ResponseWriter, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name:     s.cookieName(),
		Value:    value,
		Path:     "/",
		MaxAge:   maxAge,
		HttpOnly: true,
		Secure:   s.secure(),
		SameSite: http.SameSiteStrictMode,
	})
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	if _, err := s.session(r); err == nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	s.pages.render(w, http.StatusOK, "login", loginData{})
}

// loginFailed is the one answer to every failed sign-in: it does not tell
// an unknown account from a wrong password, a wrong code or a throttled
// account.
const loginFailed = "Sign-in failed. Check the tenant, user name, password and, if your account has two-step sign-in, the code. After 5 failures in a row an account accepts no attempt for a minute."

// errBusy is the answer when no password check could start within the
// page's time.
const errBusy = "The portal is busy. Try again in a moment."

// checkSlot waits for one of the MaxPasswordChecks slots; false when the
// request's time ran out first.
func (s *Server) checkSlot(r *http.Request) bool {
	select {
	case s.checks <- struct{}{}:
		return true
	case <-r.Context().Done():
		return false
	}
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	// Tenant ids and user names are lower case: what was typed in
	// another case names the same account.
	tenant := strings.ToLower(strings.TrimSpace(r.PostForm.Get("tenant")))
	user := strings.ToLower(strings.TrimSpace(r.PostForm.Get("user")))
	password := r.PostForm.Get("password")
	data := loginData{Tenant: tenant, User: user}
	// Names no account can have are neither throttled (they would fill
	// the throttle with junk) nor logged as typed.
	account := ids.ValidTenant(tenant) && ValidUser(user)
	addr := s.clientAddr(r)
	attrs := []any{slog.String("tenant_id", tenant), slog.String("user", user), slog.String("remote", addr)}
	if !account {
		attrs = []any{slog.Bool("valid_names", false), slog.String("remote", addr)}
	}
	if !s.addrs.allow(addr, s.cfg.Now()) {
		s.cfg.Metrics.signIns.WithLabelValues("address_limited").Inc()
		s.cfg.Logger.Warn("portal sign-in refused: too many from the address", attrs...)
		s.fail(w, r, http.StatusTooManyRequests, "Too many sign-ins from your address. Wait a minute and try again.")
		return
	}
	if account && !s.throttle.attempt(tenant, user, s.cfg.Now()) {
		s.cfg.Metrics.signIns.WithLabelValues("throttled").Inc()
		s.cfg.Logger.Warn("portal sign-in refused: account throttled", attrs...)
		data.Error = loginFailed
		s.pages.render(w, http.StatusUnauthorized, "login", data)
		return
	}
	if !s.checkSlot(r) {
		if account {
			s.throttle.undo(tenant, user) // no password was checked
		}
		s.fail(w, r, http.StatusServiceUnavailable, errBusy)
		return
	}
	result, adminRev, err := s.cfg.Admins.SignIn(r.Context(), tenant, user, password, r.PostForm.Get("code"), s.cfg.Now())
	<-s.checks
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	if result != SignInOK {
		// A wrong code after the right password is told apart in the
		// log and the metrics (never on the page): whoever sent it may
		// hold the password.
		outcome, msg := "failed", "portal sign-in failed"
		switch result {
		case SignInWrongCode:
			outcome, msg = "wrong_code", "portal sign-in failed: right password, wrong or missing two-step code"
		case SignInCodeUsed:
			outcome, msg = "code_reused", "portal sign-in failed: right password, a two-step code used before"
		}
		s.cfg.Metrics.signIns.WithLabelValues(outcome).Inc()
		s.cfg.Logger.Warn(msg, attrs...)
		data.Error = loginFailed
		s.pages.render(w, http.StatusUnauthorized, "login", data)
		return
	}
	s.throttle.succeeded(tenant, user)
	if err := s.startSession(w, r, tenant, user, adminRev); err != nil {
		s.unavailable(w, r, err)
		return
	}
	s.cfg.Metrics.signIns.WithLabelValues("ok").Inc()
	s.cfg.Logger.Info("portal sign-in", attrs...)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// startSession starts a session of the account read at adminRev and sets
// its cookie.
func (s *Server) startSession(w http.ResponseWriter, r *http.Request, tenant, user string, adminRev int64) error {
	token, _, err := s.cfg.Sessions.Start(r.Context(), tenant, user, adminRev)
	if err != nil {
		return err
	}
	s.setCookie(w, token, int(s.cfg.Sessions.ttl/time.Second))
	return nil
}

func (s *Server) accountPage(w http.ResponseWriter, _ *http.Request, sess *session) {
	s.pages.render(w, http.StatusOK, "account", accountData{Session: sess})
}

// changePassword sets the signed-in administrator's password, given the
// current one. A wrong current password counts against the sign-in
// throttle (so that a borrowed session cannot guess it faster). The new
// password is set only over the account as the session knew it: an
// operator's reset or removal meanwhile wins. Success ends every session
// of the account, this one included, and signs this browser in again
// with a new session (a new token and CSRF token).
func (s *Server) changePassword(w http.ResponseWriter, r *http.Request, sess *session) {
	current, next := r.PostForm.Get("current"), r.PostForm.Get("new")
	data := accountData{Session: sess}
	attrs := []any{slog.String("tenant_id", sess.Tenant), slog.String("user", sess.User), slog.String("remote", s.clientAddr(r))}
	switch {
	case next != r.PostForm.Get("confirm"):
		data.Error = "The new password and its confirmation differ."
	case len(next) < MinPasswordLen || len(next) > MaxPasswordLen:
		data.Error = "A password has " + strconv.Itoa(MinPasswordLen) + " to " + strconv.Itoa(MaxPasswordLen) + " bytes."
	}
	if data.Error != "" {
		s.pages.render(w, http.StatusBadRequest, "account", data)
		return
	}
	if sess.twoStep {
		// A cookie and a password must not be enough to lock the
		// owner out: the phone is asked for too.
		switch s.withCode(w, r, sess, "password change") {
		case reauthAnswered:
			return
		case reauthWrong:
			data.Error = "That code is wrong, or was used already. Wait for the next one."
			s.pages.render(w, http.StatusUnauthorized, "account", data)
			return
		}
	}
	rev, outcome := s.withCurrentPassword(w, r, sess, current, "password change", func(ctx context.Context) (int64, error) {
		// The new password's hash is made in the same slot: it costs as
		// much as the check.
		return s.cfg.Admins.SetPassword(ctx, sess.Tenant, sess.User, next, sess.AdminRev)
	})
	switch outcome {
	case reauthAnswered:
		return
	case reauthWrong:
		data.Error = "The current password is wrong."
		s.pages.render(w, http.StatusUnauthorized, "account", data)
		return
	}
	fresh, err := s.restartSession(w, r, sess, rev)
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	s.cfg.Logger.Info("portal password changed", attrs...)
	s.pages.render(w, http.StatusOK, "account", accountData{Session: fresh,
		Notice: "Your password is changed. Your other sessions have ended."})
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, sess *session) {
	if err := s.cfg.Sessions.End(r.Context(), sess); err != nil {
		s.unavailable(w, r, err)
		return
	}
	s.setCookie(w, "", -1)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// keysPerPage is the length of the key list's pages.
const keysPerPage = 50

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request, sess *session) {
	list, next, err := s.cfg.Keys.List(r.Context(), sess.Tenant, keysPerPage, r.URL.Query().Get("page"))
	if errors.Is(err, keys.ErrInvalid) {
		s.fail(w, r, http.StatusBadRequest, "That page of the list does not exist.")
		return
	}
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	now := s.cfg.Now()
	rows := make([]keyRow, len(list))
	for i, k := range list {
		rows[i] = newKeyRow(k, now)
	}
	s.pages.render(w, http.StatusOK, "keys", keysData{
		Session: sess, Keys: rows, Next: next,
		Revoked: revokedNotice(r.URL.Query().Get("revoked")),
	})
}

func (s *Server) newKey(w http.ResponseWriter, r *http.Request, sess *session) {
	s.renderForm(w, r, http.StatusOK, sess, newKeyForm())
}

func (s *Server) renderForm(w http.ResponseWriter, r *http.Request, status int, sess *session, f *keyForm) {
	var served []string
	if s.cfg.Models != nil {
		var err error
		if served, err = s.cfg.Models(r.Context()); err != nil {
			s.cfg.Logger.Warn("portal: list models", slog.Any("error", err))
		}
	}
	s.pages.render(w, status, "new", formData{Session: sess, Form: f, Served: served})
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request, sess *session) {
	f, spec := parseKeyForm(r.PostForm, sess.Tenant, s.cfg.Now())
	if spec == nil {
		s.renderForm(w, r, http.StatusBadRequest, sess, f)
		return
	}
	key, secret, err := s.cfg.Keys.Create(r.Context(), *spec)
	switch {
	case errors.Is(err, keys.ErrAlreadyExists):
		f.bad("label", "This tenant already has a key with this label.")
		s.renderForm(w, r, http.StatusConflict, sess, f)
		return
	case errors.Is(err, keys.ErrInvalid):
		// parseKeyForm holds the form to the same rules; this is a rule
		// it does not know yet.
		f.bad("label", err.Error())
		s.renderForm(w, r, http.StatusBadRequest, sess, f)
		return
	case err != nil:
		s.unavailable(w, r, err)
		return
	}
	s.cfg.Metrics.keyOps.WithLabelValues("create").Inc()
	s.cfg.Logger.Info("portal: key created", slog.String("tenant_id", sess.Tenant), slog.String("user", sess.User),
		slog.String("key_id", key.GetKeyId()), slog.String("label", key.GetLabel()))
	s.pages.render(w, http.StatusCreated, "created", createdData{Session: sess, Key: newKeyRow(key, s.cfg.Now()), Secret: secret})
}

// pathKey runs op (a read or a revocation) on the key the path names,
// in the session's tenant; a key id of another tenant, like one that does
// not exist, is "no such key". It answers the failure itself (nil, false).
func (s *Server) pathKey(w http.ResponseWriter, r *http.Request, sess *session,
	op func(ctx context.Context, tenant, id string) (*keysv1.Key, error)) (*keysv1.Key, bool) {
	id := r.PathValue("key_id")
	if !ids.ValidKey(id) {
		s.fail(w, r, http.StatusNotFound, "There is no such key.")
		return nil, false
	}
	key, err := op(r.Context(), sess.Tenant, id)
	switch {
	case errors.Is(err, keys.ErrNotFound):
		s.fail(w, r, http.StatusNotFound, "There is no such key.")
		return nil, false
	case err != nil:
		s.unavailable(w, r, err)
		return nil, false
	}
	return key, true
}

// confirmRevoke asks before a key is revoked: revoking cannot be undone.
func (s *Server) confirmRevoke(w http.ResponseWriter, r *http.Request, sess *session) {
	key, ok := s.pathKey(w, r, sess, s.cfg.Keys.Get)
	if !ok {
		return
	}
	row := newKeyRow(key, s.cfg.Now())
	if row.State == "revoked" {
		http.Redirect(w, r, "/?revoked="+url.QueryEscape(row.ID), http.StatusSeeOther)
		return
	}
	s.pages.render(w, http.StatusOK, "revoke", revokeData{Session: sess, Key: row})
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request, sess *session) {
	before := s.cfg.Now()
	key, ok := s.pathKey(w, r, sess, s.cfg.Keys.Revoke)
	if !ok {
		return
	}
	// A key revoked before (a form posted twice) is not revoked again:
	// the first revoke time stays, and only a revocation made now counts.
	if !key.GetRevokeTime().AsTime().Before(before.Truncate(time.Second)) {
		s.cfg.Metrics.keyOps.WithLabelValues("revoke").Inc()
		s.cfg.Logger.Info("portal: key revoked", slog.String("tenant_id", sess.Tenant), slog.String("user", sess.User), slog.String("key_id", key.GetKeyId()))
	}
	http.Redirect(w, r, "/?revoked="+url.QueryEscape(key.GetKeyId()), http.StatusSeeOther)
}

// static serves an embedded file.
func (s *Server) static(contentType string, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(body)
	}
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.fail(w, r, http.StatusNotFound, "There is no such page.")
}

// fail answers with an error page.
func (s *Server) fail(w http.ResponseWriter, _ *http.Request, status int, msg string) {
	s.pages.render(w, status, "error", errorData{Status: status, Message: msg})
}

// unavailable answers 503 for a failure of etcd or another dependency,
// whose detail is only logged.
func (s *Server) unavailable(w http.ResponseWriter, r *http.Request, err error) {
	s.cfg.Logger.Error("portal: request failed", slog.String("path", r.URL.Path), slog.String("remote", s.clientAddr(r)), slog.Any("error", err))
	s.fail(w, r, http.StatusServiceUnavailable, "The portal cannot reach its store just now. Try again in a moment.")
}

// keyRow is a key as the pages show it.
type keyRow struct {
	ID, Label, Hint string
	Models          string
	RPM, TPD        string
	MaxOutput       string
	Tools           string
	Created         string
	Expires         string
	State           string // active, expired or revoked
}

func newKeyRow(k *keysv1.Key, now time.Time) keyRow {
	row := keyRow{ID: k.GetKeyId(), Label: k.GetLabel(), Hint: k.GetSecretHint(), Created: k.GetCreateTime().AsTime().UTC().Format("2006-01-02 15:04 UTC"), State: "active", Expires: "never"}
	if k.GetAllModels() {
		row.Models = "all"
	} else {
		row.Models = strings.Join(k.GetModels(), ", ")
	}
	limit := func(n int64) string {
		if n == 0 {
			return "none"
		}
		return formatInt(n)
	}
	row.RPM, row.TPD, row.MaxOutput = limit(k.GetRpm()), limit(k.GetTpd()), limit(k.GetMaxOutputTokens())
	tools := make([]string, 0, len(k.GetScopes()))
	for _, sc := range k.GetScopes() {
		tools = append(tools, strings.TrimPrefix(sc, "tool:"))
	}
	row.Tools = strings.Join(tools, ", ")
	if row.Tools == "" {
		row.Tools = "none"
	}
	if k.GetExpireTime() != nil {
		exp := k.GetExpireTime().AsTime().UTC()
		row.Expires = exp.Format("2006-01-02 15:04 UTC")
		if !now.Before(exp) {
			row.State = "expired"
		}
	}
	if k.GetRevokeTime() != nil {
		row.State = "revoked"
	}
	return row
}

// formatInt writes a limit (never negative) with thousands separators.
func formatInt(n int64) string {
	digits := strconv.FormatInt(n, 10)
	out := make([]byte, 0, len(digits)+len(digits)/3)
	for i := range len(digits) {
		if i > 0 && (len(digits)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, digits[i])
	}
	return string(out)
}

// revokedNotice is the key id the list announces as revoked after a
// revocation's redirect: only a well-formed key id, so that a link cannot
// make the page say something else.
func revokedNotice(id string) string {
	if ids.ValidKey(id) {
		return id
	}
	return ""
}
