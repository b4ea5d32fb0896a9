package edge

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// DefaultMaxBodyBytesInFlight bounds the request bodies held at once when
// Config leaves it 0: 8 bodies of the default 8 MiB limit, or thousands
// of typical chat bodies of a few KiB. A body is held from its read
// until its event is recorded, and MaxInFlight alone, a count, would let
// 4,096 bodies of 8 MiB (32 GiB) in at once. A request cost the gateway
// about 19 times its body at most as measured (an 800 KB echo, most of
// it the reply: docs/limits.md), so 64 MiB of bodies keeps such requests
// near 1.2 GiB.
const DefaultMaxBodyBytesInFlight = 64 << 20

// errBodyBudget: a body without a Content-Length grew past what the
// budget has left.
var errBodyBudget = errors.New("request bodies in flight at their bound")

// bodyBudget is a weighted semaphore on the bytes of request bodies in
// flight. A body with a Content-Length takes that much before it is read;
// one without takes its bytes as they arrive. Neither waits: a body that
// does not fit is refused, since waiting would hold its connection and
// goroutine anyway.
type bodyBudget struct {
	sem  *semaphore.Weighted
	max  int64
	held atomic.Int64
}

func newBodyBudget(n int64) *bodyBudget {
	return &bodyBudget{sem: semaphore.NewWeighted(n), max: n}
}

// reserve takes a body's announced length (none when unknown) for rc.
func (b *bodyBudget) reserve(rc *requestContext, contentLength int64) bool {
	if contentLength <= 0 {
		return true
	}
	if !b.sem.TryAcquire(contentLength) {
		return false
	}
	rc.bodyHeld += contentLength
	b.held.Add(contentLength)
	return true
}

// reader returns r, taking what it reads from the budget when the length
// was not announced (reserve took it otherwise).
func (b *bodyBudget) reader(rc *requestContext, r io.Reader, contentLength int64) io.Reader {
	if contentLength > 0 {
		return r
	}
	return &budgetReader{r: r, b: b, rc: rc}
}

// release gives back what rc holds.
func (b *bodyBudget) release(rc *requestContext) {
	if rc.bodyHeld > 0 {
		b.sem.Release(rc.bodyHeld)
		b.held.Add(-rc.bodyHeld)
		rc.bodyHeld = 0
	}
}

type budgetReader struct {
	r  io.Reader
	b  *bodyBudget
	rc *requestContext
}

func (br *budgetReader) Read(p []byte) (int, error) {
	n, err := br.r.Read(p)
	if n > 0 {
		if !br.b.sem.TryAcquire(int64(n)) {
			return 0, errBodyBudget
		}
		br.rc.bodyHeld += int64(n)
		br.b.held.Add(int64(n))
	}
	return n, err
}

// BodyBytesInFlight is the bytes of request bodies held now, of
// MaxBodyBytesInFlight.
func (s *Server) BodyBytesInFlight() int64 { return s.bodies.held.Load() }

// bodyBudgetFull answers a request whose body does not fit in what
// MaxBodyBytesInFlight has left: 503 service_unavailable, Retry-After: 1.
func (s *Server) bodyBudgetFull(w http.ResponseWriter, r *http.Request, rc *requestContext) {
	w.Header().Set("Retry-After", "1")
	s.respondError(w, r, rc, newAPIError(http.StatusServiceUnavailable, codeUnavailable, typeServer,
		"the gateway holds its limit of "+formatBytes(s.cfg.MaxBodyBytesInFlight)+" of request bodies at once; retry shortly"))
}
