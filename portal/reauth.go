package portal

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"
)

// reauthOutcome is how withCurrentPassword ended.
type reauthOutcome int

const (
	// reauthDone: the password was right and the change was made.
	reauthDone reauthOutcome = iota
	// reauthWrong: a wrong password or code; the caller shows its page
	// with the error.
	reauthWrong
	// reauthAnswered: the request was answered already (throttled,
	// busy, the account changed meanwhile, or the store failed).
	reauthAnswered
)

// withCurrentPassword checks current, the signed-in administrator's
// password, before a change of the account (what names it in the log),
// and then makes the change in the same password-check slot. A wrong
// password counts against the sign-in throttle, so that a borrowed
// session cannot guess it faster. The change must be made over the
// account as the session knew it: if an operator reset or removed it
// meanwhile, the session ends and the answer is 409, so that a session
// can never undo an operator's change. change returns the account's new
// revision.
func (s *Server) withCurrentPassword(w http.ResponseWriter, r *http.Request, sess *session, current, what string,
	change func(context.Context) (int64, error)) (int64, reauthOutcome) {
	attrs := []any{slog.String("tenant_id", sess.Tenant), slog.String("user", sess.User), slog.String("remote", s.clientAddr(r))}
	if !s.attempt(w, r, sess) {
		return 0, reauthAnswered
	}
	if !s.checkSlot(r) {
		s.throttle.undo(sess.Tenant, sess.User) // no password was checked
		s.fail(w, r, http.StatusServiceUnavailable, errBusy)
		return 0, reauthAnswered
	}
	ok, verifiedRev, err := s.cfg.Admins.Verify(r.Context(), sess.Tenant, sess.User, current)
	var rev int64
	switch {
	case err == nil && verifiedRev != sess.AdminRev:
		// The account changed since the session began (an operator's
		// reset): the current password was checked against another.
		err = ErrAccountChanged
	case err == nil && ok:
		rev, err = change(r.Context())
	}
	<-s.checks
	switch {
	case errors.Is(err, ErrAccountChanged) || errors.Is(err, ErrNoAdmin):
		s.throttle.undo(sess.Tenant, sess.User) // not the password's fault
		_ = s.cfg.Sessions.End(r.Context(), sess)
		s.cfg.Logger.Warn("portal "+what+" refused: the account changed meanwhile", attrs...)
		s.fail(w, r, http.StatusConflict, "Your account was changed meanwhile, by an operator or another session. Sign in again.")
		return 0, reauthAnswered
	case err != nil:
		s.unavailable(w, r, err)
		return 0, reauthAnswered
	case !ok:
		s.cfg.Logger.Warn("portal "+what+" refused: wrong current password", attrs...)
		return 0, reauthWrong
	}
	// Only this attempt is taken back: a right password does not clear
	// the account's failures, some of which may be wrong two-step codes,
	// which a password says nothing about.
	s.throttle.undo(sess.Tenant, sess.User)
	return rev, reauthDone
}

// errThrottled is the answer to a signed-in administrator's change while
// the account's failures hold it locked.
const errThrottled = "Too many wrong passwords or codes: try again in a minute."

// attempt starts a check of a signed-in administrator's password or code:
// within the address's limit, and counted against the account's throttle
// before the check runs. It answers a refusal itself (false).
func (s *Server) attempt(w http.ResponseWriter, r *http.Request, sess *session) bool {
	if !s.addrs.allow(s.clientAddr(r), s.cfg.Now()) {
		s.fail(w, r, http.StatusTooManyRequests, "Too many attempts from your address. Wait a minute and try again.")
		return false
	}
	if !s.throttle.attempt(sess.Tenant, sess.User, s.cfg.Now()) {
		s.fail(w, r, http.StatusTooManyRequests, errThrottled)
		return false
	}
	return true
}

// withCode checks the two-step code a form carries for the signed-in
// account, before a change that must take the phone as well as the
// password (turning two-step off, a new password). The attempt is
// limited per address and counted against the account's throttle before
// the code is checked, so a locked account answers no guess at all; a
// right code takes back only this attempt. A right code is spent.
func (s *Server) withCode(w http.ResponseWriter, r *http.Request, sess *session, what string) reauthOutcome {
	if !s.attempt(w, r, sess) {
		return reauthAnswered
	}
	switch err := s.cfg.Admins.CheckCode(r.Context(), sess.Tenant, sess.User, r.PostForm.Get("code"), s.cfg.Now()); {
	case errors.Is(err, errWrongCode) || errors.Is(err, errCodeUsed):
		s.cfg.Logger.Warn("portal "+what+" refused: wrong two-step code", slog.String("tenant_id", sess.Tenant),
			slog.String("user", sess.User), slog.String("remote", s.clientAddr(r)))
		return reauthWrong
	case errors.Is(err, errNoTwoStep) || errors.Is(err, ErrNoAdmin):
		s.throttle.undo(sess.Tenant, sess.User)
		_ = s.cfg.Sessions.End(r.Context(), sess)
		s.fail(w, r, http.StatusConflict, "Your account was changed meanwhile, by an operator or another session. Sign in again.")
		return reauthAnswered
	case err != nil:
		s.throttle.undo(sess.Tenant, sess.User)
		s.unavailable(w, r, err)
		return reauthAnswered
	}
	s.throttle.undo(sess.Tenant, sess.User)
	return reauthDone
}

// restartSession ends sess, whose account its own change has just
// brought to rev (which ends every session of the account anyway), and
// signs this browser in again under a new session: a new token and CSRF
// token, so that a stolen copy of the old cookie opens nothing.
func (s *Server) restartSession(w http.ResponseWriter, r *http.Request, sess *session, rev int64) (*session, error) {
	_ = s.cfg.Sessions.End(r.Context(), sess)
	token, fresh, err := s.cfg.Sessions.Start(r.Context(), sess.Tenant, sess.User, rev)
	if err != nil {
		return nil, err
	}
	fresh.twoStep = sess.twoStep
	s.setCookie(w, token, int(s.cfg.Sessions.ttl/time.Second))
	return fresh, nil
}
