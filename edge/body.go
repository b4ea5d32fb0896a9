package edge

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/internal/readsized"
)

// readBody reads a request body into rc.call.RequestBody, never past MaxBodyBytes: a
// larger Content-Length is refused before reading, and a body without one
// (chunked) is cut at the limit by http.MaxBytesReader. Both are 413
// request_too_large. A body that has not fully arrived within
// BodyReadTimeout is 408 request_timeout. A failure is answered here; a
// client that went away mid-body is recorded as 499. It reports whether
// the body was read.
//
// The body is parsed as JSON whatever its Content-Type says, so that
// `curl -d` works as it does against OpenAI (docs/gateway-api.md).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, rc *requestContext) bool {
	limit := s.cfg.MaxBodyBytes
	// Made only when a body is refused: most bodies fit.
	tooLarge := func() *apiError {
		return newAPIError(http.StatusRequestEntityTooLarge, codeTooLarge, typeInvalidRequest,
			"request body exceeds the limit of "+formatBytes(limit))
	}
	if !identityEncoded(r) {
		s.refuseUnread(w, r)
		s.respondError(w, r, rc, newAPIError(http.StatusUnsupportedMediaType, codeUnsupportedMedia, typeInvalidRequest,
			"request bodies are read as sent, never decoded: send the body without a Content-Encoding"))
		return false
	}
	if r.ContentLength > limit {
		// A client that waits for an answer before sending its body
		// gets it at once.
		s.refuseUnread(w, r)
		s.respondError(w, r, rc, tooLarge())
		return false
	}
	// The server bounds only the headers (ReadHeaderTimeout); without
	// this a client could trickle or stall its body for ever. The
	// deadline is the body's alone, not http.Server.ReadTimeout, and is
	// cleared once the body is read, so that nothing read later on the
	// connection (HTTP/2 frames, the watch for a disconnect) times out
	// during a long reply. (A ResponseWriter without deadlines, such as
	// a test recorder, reads without one.)
	rctl := rc.out.rctl
	deadline := rctl.SetReadDeadline(time.Now().Add(s.cfg.BodyReadTimeout)) == nil
	var stopCut func() bool
	if deadline {
		// The end of a shutdown's grace cancels the request's context,
		// which does not interrupt a read: the deadline does, so that the
		// client gets its 503 before the connection is closed.
		stopCut = context.AfterFunc(r.Context(), func() {
			if shuttingDown(r) {
				_ = rctl.SetReadDeadline(time.Now())
			}
		})
	}
	if !s.bodies.reserve(rc, r.ContentLength) {
		s.refuseUnread(w, r)
		s.bodyBudgetFull(w, r, rc)
		return false
	}
	body, err := readsized.ReadAll(s.bodies.reader(rc, http.MaxBytesReader(w, r.Body, limit), r.ContentLength), r.ContentLength, -1)
	if deadline {
		stopCut()
		_ = rctl.SetReadDeadline(time.Time{})
	}
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.Is(err, errBodyBudget):
			s.refuseUnread(w, r)
			s.bodyBudgetFull(w, r, rc)
		case errors.As(err, &mbe):
			s.refuseUnread(w, r)
			s.respondError(w, r, rc, tooLarge())
		case shuttingDown(r):
			s.refuseUnread(w, r)
			s.clientGone(w, r, rc)
		case errors.Is(err, os.ErrDeadlineExceeded):
			// Asked before clientGone: a read that timed out cancels the
			// request's context too, though the client may well be there
			// to read the answer. The rest of its body is not read.
			s.refuseUnread(w, r)
			s.respondError(w, r, rc, newAPIError(http.StatusRequestTimeout, codeRequestTimeout, typeInvalidRequest,
				"the request body did not arrive within "+s.cfg.BodyReadTimeout.String()+"; send it in full, without pauses"))
		case s.clientGone(w, r, rc): // 499 and nothing written, or 503 in a shutdown
		default:
			s.respondError(w, r, rc, invalid("", "reading the request body: %v", err))
		}
		return false
	}
	rc.call.RequestBody = body
	return s.reauthenticate(w, r, rc)
}

// identityEncoded reports whether the request's body is sent as it is:
// no Content-Encoding, or only "identity". A compressed body would
// otherwise be parsed as malformed JSON, and a plain body labelled
// compressed would be served under a label that says otherwise.
func identityEncoded(r *http.Request) bool {
	for _, v := range r.Header["Content-Encoding"] {
		for coding := range strings.SplitSeq(v, ",") {
			if c := strings.TrimSpace(coding); c != "" && !strings.EqualFold(c, "identity") {
				return false
			}
		}
	}
	return true
}

// unreadBodyGrace is how long, at most, the rest of a body the edge does
// not read may take to arrive once the answer is on its way (see
// refuseUnread); BodyReadTimeout, when shorter, bounds it too.
const unreadBodyGrace = time.Second

// refuseUnread prepares the answer to a request whose body is not read
// (refused by route, method, key, size or deadline), before the answer's
// header is written. Without it net/http reads up to 256 KiB of the unread
// body with no deadline (before writing the answer unless the connection
// is to close, and again when closing it), so a client that sends headers
// and stalls its body would hold the connection and its goroutine for
// ever, without even a key. The connection closes after the answer, and
// what net/http still reads of the body must arrive within
// unreadBodyGrace: a body already sent is read at once, so the close is
// clean. A request without a body keeps its connection.
func (s *Server) refuseUnread(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength == 0 {
		return
	}
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(min(unreadBodyGrace, s.cfg.BodyReadTimeout)))
}

// formatBytes writes a byte count for people: 8 MiB, 512 KiB, 100 bytes.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
