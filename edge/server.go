// Package edge is the hand-written HTTP edge: it speaks the OpenAI
// chat-completion wire protocol byte for byte (JSON and SSE) and calls the
// internal gRPC services. See docs/gateway-api.md for the decisions where
// the spec is silent.
//
// Every request flows through the same steps:
//
//	request id → authenticate → read body → decode and validate →
//	model permission → policy → limits → engine → write → audit
//
// Policy, limits and audit are optional hooks of Config, so each can be
// wired (and tested) on its own.
package edge

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/keys"
	"github.com/tollgate-dev/tollgate/server/limits"
)

// DefaultMaxBodyBytes bounds a request body when Config leaves it 0.
const DefaultMaxBodyBytes = 8 << 20

// Authenticator resolves a bearer secret; it returns keys.ErrUnauthorized
// for a missing, unknown, expired or revoked key.
type Authenticator interface {
	Authenticate(secret string) (*keys.Principal, error)
}

// Config is what the edge needs.
type Config struct {
	Inference    inferencev1.InferenceServiceClient
	Auth         Authenticator
	Logger       *slog.Logger
	MaxBodyBytes int64            // 0 means DefaultMaxBodyBytes
	Now          func() time.Time // nil means time.Now; used for `created`
	// ApplianceID (app_<id>) is given to the policy with every decision.
	ApplianceID string
	// Policy, when set, decides every chat and embeddings request before
	// the engine sees it.
	Policy Decider
	// Audit, when set, records every authenticated request durably before
	// the client sees the end of its response.
	Audit Recorder
	// Limits, when set, admits every authenticated request against its
	// key's RPM and TPD before the engine runs.
	Limits Limiter
	// Health reports whether the gateway is fully functional, for
	// GET /healthz; nil means always healthy.
	Health func() (ok bool, detail string)
	// Metrics, when set, counts requests.
	Metrics *Metrics
}

// Server is the edge's http.Handler.
type Server struct {
	cfg Config
	log *slog.Logger
	mux *http.ServeMux
}

// New returns the edge handler serving /v1/….
func New(cfg Config) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux()}
	s.route("/v1/chat/completions", http.MethodPost, s.chatCompletions)
	s.route("/v1/embeddings", http.MethodPost, s.embeddings)
	s.route("/v1/models", http.MethodGet, s.listModels)
	// {model...} takes the rest of the path, so an id arrives whole whether
	// its '/' was sent as %2F (as the SDKs do) or not.
	s.route("/v1/models/{model...}", http.MethodGet, s.getModel)
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, requestIDOf(w), notFound("no route for %s %s", r.Method, r.URL.Path))
	})
	return s
}

// handlerFunc serves an authenticated request.
type handlerFunc func(w http.ResponseWriter, r *http.Request, rc *requestContext)

// requestContext is what every handler knows about its request, and what
// its audit event is made of.
type requestContext struct {
	id        string
	endpoint  string
	principal *keys.Principal
	received  time.Time
	body      []byte // the request body as received

	model            string
	promptTokens     int64
	completionTokens int64
	decisionID       string // dec_<id> of the policy decision, if any

	reservation  limits.Reservation // what Limits admitted, settled at the end
	limitHeaders bool               // x-ratelimit-* headers already set
}

func (s *Server) route(pattern, method string, h handlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		rc := &requestContext{id: requestIDOf(w), endpoint: strings.TrimSuffix(pattern, "/{model...}"), received: s.cfg.Now()}
		if r.Method != method {
			w.Header().Set("Allow", method)
			writeError(w, rc.id, &apiError{Status: http.StatusMethodNotAllowed, Code: codeMethodNotAllowed, Type: typeInvalidRequest,
				Message: r.Method + " is not allowed here; use " + method})
			return
		}
		p, err := s.authenticate(r)
		if err != nil {
			// Not part of any tenant's tree; a security log line instead.
			s.log.Warn("unauthenticated request", "request_id", rc.id, "path", r.URL.Path, "remote", r.RemoteAddr)
			if s.cfg.Metrics != nil {
				s.cfg.Metrics.Unauthenticated.Inc()
			}
			writeError(w, rc.id, unauthorized())
			return
		}
		rc.principal = p
		h(w, r, rc)
	})
}

// ServeHTTP gives every response its x-request-id before routing.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("x-request-id", newRequestID())
	s.mux.ServeHTTP(w, r)
}

func requestIDOf(w http.ResponseWriter) string { return w.Header().Get("x-request-id") }

func (s *Server) authenticate(r *http.Request) (*keys.Principal, error) {
	h := r.Header.Get("Authorization")
	scheme, secret, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || secret == "" {
		return nil, keys.ErrUnauthorized
	}
	return s.cfg.Auth.Authenticate(strings.TrimSpace(secret))
}

// readBody reads a request body into rc.body, never past MaxBodyBytes. The body is
// parsed as JSON whatever its Content-Type says, so that `curl -d` works as
// it does against OpenAI (docs/gateway-api.md).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, rc *requestContext) *apiError {
	tooLarge := &apiError{Status: http.StatusRequestEntityTooLarge, Code: codeTooLarge, Type: typeInvalidRequest,
		Message: "request body exceeds the limit of " + formatBytes(s.cfg.MaxBodyBytes)}
	if r.ContentLength > s.cfg.MaxBodyBytes {
		return tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge
		}
		return invalid("", "reading the request body: %v", err)
	}
	rc.body = body
	return nil
}

// writeError writes e in the spec's envelope.
func writeError(w http.ResponseWriter, requestID string, e *apiError) {
	e.RequestID = requestID
	body, _ := json.Marshal(errorEnvelope{Error: e})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// healthz reports whether the gateway is fully functional: 200 when it is,
// 503 with the reason when it is degraded (for example, limits served only
// from held allotments while etcd is unreachable).
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	ok, detail := true, "ok"
	if s.cfg.Health != nil {
		ok, detail = s.cfg.Health()
	}
	status, word := http.StatusOK, "ok"
	if !ok {
		status, word = http.StatusServiceUnavailable, "degraded"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(mustMarshal(map[string]string{"status": word, "detail": detail}))
}
