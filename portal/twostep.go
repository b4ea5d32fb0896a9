package portal

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
)

// twoStepExempt reports whether r may be served to a session without
// two-step sign-in while the portal requires it: the account pages, where
// it is set up, and signing out.
func twoStepExempt(r *http.Request) bool {
	p := r.URL.Path
	return p == "/logout" || p == "/account" || strings.HasPrefix(p, "/account/")
}

// twoStepPage shows whether two-step sign-in is on. When it is off, it
// shows a new secret to set it up with, kept in the session until a code
// from it turns two-step sign-in on.
func (s *Server) twoStepPage(w http.ResponseWriter, r *http.Request, sess *session) {
	s.renderTwoStep(w, r, http.StatusOK, sess, twoStepData{})
}

// renderTwoStep renders the two-step page of sess with data's error or
// notice.
func (s *Server) renderTwoStep(w http.ResponseWriter, r *http.Request, status int, sess *session, data twoStepData) {
	data.Session, data.On, data.Required = sess, sess.twoStep, s.cfg.RequireTwoStep
	if !sess.twoStep {
		if sess.PendingTOTP == "" {
			link, err := newTOTPLink(sess.Tenant, sess.User)
			if err == nil {
				err = s.cfg.Sessions.SetPendingTOTP(r.Context(), sess, link)
			}
			if err != nil {
				s.unavailable(w, r, err)
				return
			}
		}
		secret, err := linkSecret(sess.PendingTOTP)
		if err != nil {
			s.unavailable(w, r, err)
			return
		}
		data.Secret = groupsOf4(secret)
		data.Link = sess.PendingTOTP
	}
	s.pages.render(w, status, "twostep", data)
}

// groupsOf4 writes a base32 secret in groups of four, as apps that take
// it typed show it.
func groupsOf4(secret string) string {
	var b strings.Builder
	for i := 0; i < len(secret); i += 4 {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(secret[i:min(i+4, len(secret))])
	}
	return b.String()
}

// twoStepQR draws the session's pending secret as a QR code for an
// authenticator app to scan.
func (s *Server) twoStepQR(w http.ResponseWriter, r *http.Request, sess *session) {
	if sess.twoStep || sess.PendingTOTP == "" {
		s.fail(w, r, http.StatusNotFound, "There is no two-step secret being set up.")
		return
	}
	img, err := totpQR(sess.PendingTOTP)
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	w.Header().Set("Content-Length", strconv.Itoa(len(img)))
	_, _ = w.Write(img)
}

// twoStepOn turns two-step sign-in on with the session's pending secret,
// given a code made from it (proof that the app has it) and the current
// password. Like a password change, it ends every session of the
// account and signs this browser in again.
func (s *Server) twoStepOn(w http.ResponseWriter, r *http.Request, sess *session) {
	if sess.twoStep {
		http.Redirect(w, r, "/account/two-step", http.StatusSeeOther)
		return
	}
	if sess.PendingTOTP == "" {
		s.fail(w, r, http.StatusConflict, "This setup has expired. Open the two-step page again.")
		return
	}
	secret, err := linkSecret(sess.PendingTOTP)
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	step, ok := codeStep(secret, normalizeCode(r.PostForm.Get("code")), s.cfg.Now())
	if !ok {
		s.renderTwoStep(w, r, http.StatusBadRequest, sess, twoStepData{
			Error: "That code is wrong. Type the 6 digits the app shows now; if it still fails, check that the phone's clock is right."})
		return
	}
	rev, outcome := s.withCurrentPassword(w, r, sess, r.PostForm.Get("current"), "two-step setup", func(ctx context.Context) (int64, error) {
		// The code that proved the app cannot sign in afterwards.
		if err := s.cfg.Admins.useStep(ctx, sess.Tenant, sess.User, step); err != nil && !errors.Is(err, errCodeUsed) {
			return 0, err
		}
		return s.cfg.Admins.SetTOTP(ctx, sess.Tenant, sess.User, secret, sess.AdminRev)
	})
	switch outcome {
	case reauthAnswered:
		return
	case reauthWrong:
		s.renderTwoStep(w, r, http.StatusUnauthorized, sess, twoStepData{Error: "The current password is wrong."})
		return
	}
	s.twoStepChanged(w, r, sess, rev, "two-step sign-in turned on",
		"Two-step sign-in is on: from now on, sign in with a code from the app as well. Your other sessions have ended.")
}

// twoStepOff turns two-step sign-in off, given a code from the app and
// the current password: a borrowed session cannot turn it off without
// the phone. Refused while the portal requires it.
func (s *Server) twoStepOff(w http.ResponseWriter, r *http.Request, sess *session) {
	if s.cfg.RequireTwoStep {
		s.fail(w, r, http.StatusForbidden, "This portal requires two-step sign-in: it cannot be turned off. If the phone is lost, an operator can reset it.")
		return
	}
	if !sess.twoStep {
		http.Redirect(w, r, "/account/two-step", http.StatusSeeOther)
		return
	}
	switch s.withCode(w, r, sess, "two-step turn-off") {
	case reauthAnswered:
		return
	case reauthWrong:
		s.renderTwoStep(w, r, http.StatusUnauthorized, sess, twoStepData{Error: "That code is wrong, or was used already. Wait for the next one."})
		return
	}
	rev, outcome := s.withCurrentPassword(w, r, sess, r.PostForm.Get("current"), "two-step turn-off", func(ctx context.Context) (int64, error) {
		return s.cfg.Admins.SetTOTP(ctx, sess.Tenant, sess.User, "", sess.AdminRev)
	})
	switch outcome {
	case reauthAnswered:
		return
	case reauthWrong:
		s.renderTwoStep(w, r, http.StatusUnauthorized, sess, twoStepData{Error: "The current password is wrong."})
		return
	}
	s.twoStepChanged(w, r, sess, rev, "two-step sign-in turned off", "Two-step sign-in is off. Your other sessions have ended.")
}

// twoStepChanged signs the browser in again after its session turned
// two-step sign-in on or off, and shows the page with notice.
func (s *Server) twoStepChanged(w http.ResponseWriter, r *http.Request, sess *session, rev int64, logMsg, notice string) {
	fresh, err := s.restartSession(w, r, sess, rev)
	if err != nil {
		s.unavailable(w, r, err)
		return
	}
	fresh.twoStep = !sess.twoStep
	change := "off"
	if fresh.twoStep {
		change = "on"
	}
	s.cfg.Metrics.twoStepChanges.WithLabelValues(change).Inc()
	s.cfg.Logger.Info("portal "+logMsg, slog.String("tenant_id", sess.Tenant), slog.String("user", sess.User),
		slog.String("remote", s.clientAddr(r)))
	s.renderTwoStep(w, r, http.StatusOK, fresh, twoStepData{Notice: notice})
}
