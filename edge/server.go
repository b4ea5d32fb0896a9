// Package edge is the hand-written HTTP edge: it speaks the OpenAI
// chat-completion wire protocol byte for byte (JSON and SSE) over the
// governed request pipeline (server/pipeline), which it calls in-process.
// The edge makes no governance decision: keys, policy, limits, the engine
// call and the audit event are the pipeline's; the edge keeps HTTP. See
// docs/gateway-api.md for the decisions where the spec is silent.
//
// Every request flows through the same steps, in this order:
//
//	request id      ServeHTTP: x-request-id on every response
//	route, method   New, route: 404 or 405, before the key is looked at
//	                (so never audited)
//	authenticate    route (auth.go): the bearer secret, resolved by the
//	                pipeline; 401 before the request is read
//	read body       readBody (body.go): 413 past MaxBodyBytes, 408 past
//	                BodyReadTimeout; the key is looked up again once the
//	                body is in (reauthenticate: an audited 401)
//	decode/validate decodeChat, decodeEmbeddings: 400 naming the param
//	policy, limits  the pipeline's Decide* and Reserve*: 403 with the
//	                decision id, 429 with Retry-After, 503 (refuse,
//	                errors.go)
//	engine          the pipeline's Chat, Embed, Models, cancelled with the
//	                client's request
//	write           plainChat, streamChat (chunk.go, sse.go); each write
//	                bounded by WriteStallTimeout (stall.go)
//	audit           respond (audit.go): the pipeline records the event,
//	                durable before the final byte (the body, or the
//	                stream's [DONE]), then settles the usage
package edge

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/internal/ids"
	"github.com/tollgate-dev/tollgate/internal/urlpath"
	"github.com/tollgate-dev/tollgate/server/pipeline"
)

// DefaultMaxBodyBytes bounds a request body when Config leaves it 0.
const DefaultMaxBodyBytes = 8 << 20

// DefaultBodyReadTimeout bounds the time a client has to send its request
// body, from the end of its headers, when Config leaves it 0: ample for
// DefaultMaxBodyBytes over a slow link.
const DefaultBodyReadTimeout = 60 * time.Second

// Config is what the edge needs. Pipeline is required.
type Config struct {
	// Pipeline governs every authenticated request: its clock is the
	// edge's too (`created`).
	Pipeline     *pipeline.Pipeline
	Logger       *slog.Logger // nil means slog.Default()
	MaxBodyBytes int64        // 0 means DefaultMaxBodyBytes
	// BodyReadTimeout bounds reading a request body (408 past it); 0
	// means DefaultBodyReadTimeout. Only the body: a stream's reply is
	// not cut by it.
	BodyReadTimeout time.Duration
	// WriteStallTimeout bounds how long a client may leave a part of its
	// response untaken: each event of a stream, and each 64 KiB of a
	// plain body, must be written to it within this bound. A client that
	// stops reading fails the write, and its request ends as one whose
	// client went away (recorded, its slot freed) instead of holding a
	// slot for ever. 0 means DefaultWriteStallTimeout. A reply slow to be
	// produced is not cut: only the waits on the client count.
	WriteStallTimeout time.Duration
	// Health reports whether the gateway is fully functional, for
	// GET /healthz; nil means always healthy.
	Health func() (ok bool, detail string)
	// Metrics, when set, counts requests.
	Metrics *Metrics
	// MaxInFlight bounds the requests served at once (streams included);
	// 0 means DefaultMaxInFlight. One more is answered 503
	// service_unavailable with Retry-After, before its key is checked
	// and so unaudited, as while starting. GET /healthz is not counted.
	MaxInFlight int
	// MaxBodyBytesInFlight bounds the bytes of request bodies held at
	// once, across requests (bodybudget.go); 0 means
	// DefaultMaxBodyBytesInFlight, and a value below MaxBodyBytes is
	// raised to it. A request whose body does not fit is answered 503
	// service_unavailable with Retry-After: 1 before its body is read
	// (or, without a Content-Length, once it would pass the bound).
	MaxBodyBytesInFlight int64
	// Ready, when set, is closed once the gateway can serve (its key cache
	// has loaded from etcd). Until then GET /healthz answers 503
	// "starting" and every other request 503 service_unavailable, before
	// routing and unaudited; nil means ready from the start.
	Ready <-chan struct{}
}

// DefaultMaxInFlight bounds the requests a gateway serves at once when
// Config leaves it 0: each holds a goroutine, its body (up to
// MaxBodyBytes) and, for a model server, a connection to it.
const DefaultMaxInFlight = 4096

// startingDetail is what a gateway whose Ready is still open tells clients.
const startingDetail = "key cache not loaded: waiting for etcd"

// Server is the edge's http.Handler.
type Server struct {
	cfg   Config
	core  *pipeline.Pipeline
	log   *slog.Logger
	mux   *http.ServeMux
	slots chan struct{} // one per request in flight
	// bodies holds the bytes of the request bodies in flight.
	bodies *bodyBudget
}

// New returns the edge handler serving /v1/… (and GET /healthz).
func New(cfg Config) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.BodyReadTimeout <= 0 {
		cfg.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if cfg.WriteStallTimeout <= 0 {
		cfg.WriteStallTimeout = DefaultWriteStallTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.MaxBodyBytesInFlight <= 0 {
		cfg.MaxBodyBytesInFlight = DefaultMaxBodyBytesInFlight
	}
	cfg.MaxBodyBytesInFlight = max(cfg.MaxBodyBytesInFlight, cfg.MaxBodyBytes)
	s := &Server{cfg: cfg, core: cfg.Pipeline, log: cfg.Logger, mux: http.NewServeMux(), slots: make(chan struct{}, cfg.MaxInFlight),
		bodies: newBodyBudget(cfg.MaxBodyBytesInFlight)}
	if cfg.Metrics != nil {
		inFlight := s.InFlight
		cfg.Metrics.inFlight.Store(&inFlight)
	}
	s.route("/v1/chat/completions", http.MethodPost, s.chatCompletions)
	s.route("/v1/completions", http.MethodPost, s.completions)
	s.route("/v1/embeddings", http.MethodPost, s.embeddings)
	s.route("/v1/responses", http.MethodPost, s.responses)
	s.routeMethods("/v1/responses/{id}", map[string]handlerFunc{http.MethodGet: s.getResponse, http.MethodDelete: s.deleteResponse})
	s.route("/v1/receipts/{id}", http.MethodGet, s.getReceipt)
	s.route("/v1/models", http.MethodGet, s.listModels)
	// {model...} takes the rest of the path, unescaped, so an id arrives
	// whole whether its '/' was sent as %2F (as the SDKs do) or not.
	s.route("/v1/models/{model...}", http.MethodGet, s.getModel)
	s.mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		s.refuseUnread(w, r) // nothing here reads a body
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, requestIDOf(w), newAPIError(http.StatusMethodNotAllowed, codeMethodNotAllowed, typeInvalidRequest,
				r.Method+" is not allowed here; use GET"))
			return
		}
		s.healthz(w, r)
	})
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.refuseUnread(w, r)
		writeError(w, requestIDOf(w), notFound("no route for %s %s", r.Method, r.URL.Path))
	})
	return s
}

// ServeHTTP gives every response its x-request-id before routing.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header()[requestIDHeader] = []string{ids.NewRequest()}
	if s.cfg.Ready != nil {
		select {
		case <-s.cfg.Ready:
		default:
			s.refuseUnread(w, r)
			s.starting(w, r)
			return
		}
	}
	if r.Method == http.MethodConnect {
		// http.ServeMux answers CONNECT (whose target is a host, not a
		// path) with a plain-text 404 before any pattern; the gateway is
		// no proxy.
		s.refuseUnread(w, r)
		writeError(w, requestIDOf(w), notFound("no route for CONNECT %s: the gateway is not a proxy", r.Host))
		return
	}
	if !urlpath.Canonical(r.URL.EscapedPath()) {
		// http.ServeMux would answer a redirect to the cleaned path,
		// outside the error envelope; a client sending such a path has
		// built its URL wrong, and is told so.
		s.refuseUnread(w, r)
		writeError(w, requestIDOf(w), notFound("no route for %s %s: the path is not canonical (empty, '.' or '..' segments)",
			r.Method, r.URL.EscapedPath()))
		return
	}
	if r.URL.Path != "/healthz" {
		select {
		case s.slots <- struct{}{}:
			defer func() { <-s.slots }()
		default:
			s.refuseUnread(w, r)
			s.busy(w)
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// InFlight is the requests being served, GET /healthz aside: the slots
// MaxInFlight bounds.
func (s *Server) InFlight() int { return len(s.slots) }

// Drained waits until no request is in flight, or ctx ends (false). Call
// it once the HTTP server takes no new requests (after Shutdown or
// Close): handlers that Close released from a blocked write still record
// their events before they return, and whatever they use (the limiter,
// the audit log) must stay open until then. It takes every slot, then
// gives them back.
func (s *Server) Drained(ctx context.Context) bool {
	taken := 0
	defer func() {
		for range taken {
			<-s.slots
		}
	}()
	for range cap(s.slots) {
		select {
		case s.slots <- struct{}{}:
			taken++
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// busy answers a request beyond MaxInFlight.
func (s *Server) busy(w http.ResponseWriter) {
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.Busy.Inc()
	}
	retryShortly(w, fmt.Sprintf("the gateway is serving its limit of %d requests at once; retry shortly", s.cfg.MaxInFlight))
}

// starting answers a request that arrives before the gateway is ready: it
// cannot tell a valid key from an unknown one yet, so it serves nothing.
func (s *Server) starting(w http.ResponseWriter, r *http.Request) {
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL.Path == "/healthz" {
		writeHealth(w, http.StatusServiceUnavailable, "starting", startingDetail)
		return
	}
	retryShortly(w, "the gateway is starting ("+startingDetail+"); retry shortly")
}

// retryShortly answers 503 service_unavailable with Retry-After: 1, outside
// the audited path: the gateway cannot serve the request now, and soon can.
func retryShortly(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", "1")
	writeError(w, requestIDOf(w), newAPIError(http.StatusServiceUnavailable, codeUnavailable, typeServer, msg))
}

// requestIDHeader is x-request-id in net/http's canonical form, so that
// setting and reading it, several times a request, canonicalizes nothing
// (a lowercase name costs an allocation each time).
const requestIDHeader = "X-Request-Id"

func requestIDOf(w http.ResponseWriter) string {
	if v := w.Header()[requestIDHeader]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// handlerFunc serves an authenticated request.
type handlerFunc func(w http.ResponseWriter, r *http.Request, rc *requestContext)

// requestContext is what every handler knows about its request: its
// governed call (the key, the policy decision, the reservation, what its
// audit event is made of) and how its response is written.
type requestContext struct {
	// bodyHeld is the bytes of the body budget the request holds.
	bodyHeld int64
	id       string
	endpoint string
	call     *pipeline.Call
	secret   string // the bearer secret, looked up again once the body is in
	// limitHeaders: the x-ratelimit-* headers are set.
	limitHeaders bool

	out stallWriter // every audited write of the response goes through it
}

// route serves pattern for one method: 405 for any other, then 401 unless
// the request carries a valid key, then h.
func (s *Server) route(pattern, method string, h handlerFunc) {
	s.routeMethods(pattern, map[string]handlerFunc{method: h})
}

// routeMethods is route for a path that serves several methods. The
// audit event's endpoint is the pattern without its {…} path value.
func (s *Server) routeMethods(pattern string, hs map[string]handlerFunc) {
	endpoint := pattern
	if i := strings.Index(pattern, "/{"); i >= 0 {
		endpoint = pattern[:i]
	}
	allowed := strings.Join(slices.Sorted(maps.Keys(hs)), ", ")
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		rc := &requestContext{id: requestIDOf(w), endpoint: endpoint,
			out: newStallWriter(w, s.cfg.WriteStallTimeout)}
		received := s.core.Now()
		if r.Method != http.MethodPost {
			s.refuseUnread(w, r) // only a POST handler reads a body
		}
		h, ok := hs[r.Method]
		if !ok {
			s.refuseUnread(w, r)
			w.Header().Set("Allow", allowed)
			writeError(w, rc.id, newAPIError(http.StatusMethodNotAllowed, codeMethodNotAllowed, typeInvalidRequest,
				r.Method+" is not allowed here; use "+strings.Join(slices.Sorted(maps.Keys(hs)), " or ")))
			return
		}
		r, span := s.startSpan(r, r.Method, endpoint, rc.id)
		defer span.End()
		secret := bearerSecret(r)
		p, err := s.authenticate(r, secret)
		if err != nil {
			s.refuseUnread(w, r)
			s.refuseUnauthenticated(w, r, rc.id, err)
			return
		}
		rc.secret = secret
		rc.call = s.core.Begin(rc.id, endpoint, p, received)
		defer s.bodies.release(rc) // the body is held until its event is recorded
		h(w, r, rc)
	})
}

// healthz reports whether the gateway is fully functional: 200 when it is,
// 503 with the reason when it is degraded (for example, limits served only
// from held allotments while etcd is unreachable). Before the gateway is
// ready, starting answers instead.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	ok, detail := true, "ok"
	if s.cfg.Health != nil {
		ok, detail = s.cfg.Health()
	}
	status, word := http.StatusOK, "ok"
	if !ok {
		status, word = http.StatusServiceUnavailable, "degraded"
	}
	writeHealth(w, status, word, detail)
}

func writeHealth(w http.ResponseWriter, status int, word, detail string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(mustMarshal(map[string]string{"status": word, "detail": detail}))
}
