// Package vllmfake is an in-process stand-in for a vLLM server's
// OpenAI-compatible HTTP API, for the tests of the engine that forwards to
// vLLM. It copies the wire behaviour of vLLM main in early 2026 (the
// v0.1x line after the OpenAI entrypoints moved into per-API packages:
// chat serving at commit 5e918640d7b6, protocol models at d7e52523a55c),
// started as `vllm serve MODEL --enable-auto-tool-choice
// --tool-call-parser hermes`: field names and order as vLLM's pydantic
// models serialise them, null versus absent fields, SSE framing, error
// bodies and statuses. Older releases (up to about v0.15) sent fewer null
// fields in stream chunks (no token_ids, prompt_token_ids or
// reasoning_content); a client must not depend on those fields either way.
// reasoning_effort is as vLLM main has it from mid-2026 (protocol models
// at 002032ee2b18): seven values, "max" among them, and the enable_thinking
// it implies for the chat template (vLLM pull request 43401); servers
// before that pass it to the template without enable_thinking.
//
// The "model" is an echo: the chat template and tokenizer are trivial and
// fixed (see Template and Tokenize) so tests can assert exact bytes, and the
// reply is the text of the last user message.
package vllmfake

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/openai"
)

// MaxBodyBytes bounds a request body. vLLM itself sets no limit (uvicorn
// reads what it is sent); the fake answers a larger body with 413 and a
// body in vLLM's error shape, so a test that sends one notices.
const MaxBodyBytes = 16 << 20

// DefaultMaxModelLen is a Model's context length when it gives none.
const DefaultMaxModelLen = 8192

// Model is one model the fake serves.
type Model struct {
	// ID is the served model name, e.g. "meta-llama/Llama-3.1-8B-Instruct".
	ID string
	// Embedding makes the model serve /v1/embeddings instead of chat
	// (vLLM runs one model per server, and a server is one or the other).
	Embedding bool
	// MaxModelLen is the context length in tokens; 0 means DefaultMaxModelLen.
	MaxModelLen int
	// Reasoning makes it a reasoning model served with a reasoning parser
	// (vllm serve --reasoning-parser): before its reply it thinks
	// FakeReasoning, which the server returns as `reasoning`, apart from
	// the content; the thinking and its closing tag count as completion
	// tokens.
	Reasoning bool
}

// FakeReasoning is what a reasoning model of the fake thinks before it
// answers.
const FakeReasoning = "The user wants their words back."

func (m Model) maxLen() int {
	if m.MaxModelLen > 0 {
		return m.MaxModelLen
	}
	return DefaultMaxModelLen
}

// Server is a running fake vLLM server.
type Server struct {
	// URL is the base URL, without a trailing slash, e.g. http://127.0.0.1:PORT.
	URL string

	caPEM []byte // StartTLS: the server certificate's CA

	mu         sync.Mutex
	models     []Model // replaced whole by SetModels, never changed in place
	requests   map[string][][]byte
	headers    map[string][]http.Header
	failNext   map[string]failure
	breakAfter int // -1: no break armed
	apiKey     string
	// oldReasoning: stream reasoning as vLLM did before it renamed the
	// field, in reasoning_content only.
	oldReasoning bool
}

type failure struct {
	status  int
	message string
}

// Start starts a fake serving models on 127.0.0.1 and closes it when the
// test ends. With no models it serves one chat model,
// "meta-llama/Llama-3.1-8B-Instruct".
func Start(t testing.TB, models ...Model) *Server {
	t.Helper()
	return start(t, false, models)
}

// StartTLS is Start over HTTPS (vllm serve --ssl-certfile), with a
// certificate of httptest's own CA, returned as PEM for the client.
func StartTLS(t testing.TB, models ...Model) (*Server, []byte) {
	t.Helper()
	s := start(t, true, models)
	return s, s.caPEM
}

func start(t testing.TB, tls bool, models []Model) *Server {
	t.Helper()
	if len(models) == 0 {
		models = []Model{{ID: "meta-llama/Llama-3.1-8B-Instruct"}}
	}
	s := &Server{
		models:     append([]Model(nil), models...),
		requests:   map[string][][]byte{},
		headers:    map[string][]http.Header{},
		failNext:   map[string]failure{},
		breakAfter: -1,
	}
	hs := httptest.NewUnstartedServer(http.HandlerFunc(s.serveHTTP))
	if tls {
		hs.StartTLS()
		s.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hs.Certificate().Raw})
	} else {
		hs.Start()
	}
	s.URL = hs.URL
	t.Cleanup(hs.Close)
	return s
}

// Requests returns copies of the raw bodies received on path (e.g.
// "/v1/chat/completions"), in order. Bodies of requests refused for a
// missing API key are not recorded; those answered by FailNext are.
func (s *Server) Requests(path string) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]byte, len(s.requests[path]))
	for i, b := range s.requests[path] {
		out[i] = bytes.Clone(b)
	}
	return out
}

// Headers returns the headers of the requests received on path, in order
// (copies).
func (s *Server) Headers(path string) []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]http.Header, len(s.headers[path]))
	for i, h := range s.headers[path] {
		out[i] = h.Clone()
	}
	return out
}

// FailNext makes the next request on path get vLLM's error response with
// status and message, as vLLM's serving layer builds it: body
// {"error":{"message","type","param","code"}}, type chosen from status as
// vLLM does (400 BadRequestError, 404 NotFoundError, 500
// InternalServerError, ...).
func (s *Server) FailNext(path string, status int, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext[path] = failure{status, message}
}

// BreakStreamAfter makes the next streamed chat completion send its role
// chunk and n content chunks, then fail as vLLM does when generation fails
// mid-stream: one `data: {"error": {...}}` frame (status 500 inside, the
// HTTP status stays 200) followed by `data: [DONE]`, with no finish or
// usage chunk.
func (s *Server) BreakStreamAfter(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.breakAfter = n
}

// SetReasoningField sets the field a reasoning model's streamed thinking
// comes in: "reasoning" (vLLM since its rename, the default; deltas also
// carry the deprecated copy) or "reasoning_content" (vLLM before it).
func (s *Server) SetReasoningField(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.oldReasoning = name == "reasoning_content"
}

// SetModels replaces the models the fake serves, as a model server
// restarted with other settings (another --max-model-len) would.
func (s *Server) SetModels(models ...Model) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models = append([]Model(nil), models...)
}

// served is the models the fake serves now.
func (s *Server) served() []Model {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.models
}

// SetAPIKey makes the fake require "Authorization: Bearer key" as
// `vllm serve --api-key` does: only paths under /v1 (and vLLM's other
// guarded prefixes /v2, /inference, /cohere) are checked; /health and
// /tokenize stay open. A refused request gets 401 {"error":"Unauthorized"}.
// An empty key turns the check off.
func (s *Server) SetAPIKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apiKey = key
}

var guardedPrefixes = []string{"/v1", "/v2", "/inference", "/cohere"}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	key := s.apiKey
	s.mu.Unlock()
	if key != "" && r.Method != http.MethodOptions && guarded(r.URL.Path) && !bearerOK(r, key) {
		writeJSON(w, http.StatusUnauthorized, obj{{"error", "Unauthorized"}})
		return
	}

	route, ok := s.route(r.URL.Path)
	if !ok {
		writeJSON(w, http.StatusNotFound, obj{{"detail", "Not Found"}})
		return
	}
	if r.Method != route.method {
		w.Header().Set("Allow", route.method)
		writeJSON(w, http.StatusMethodNotAllowed, obj{{"detail", "Method Not Allowed"}})
		return
	}

	var body []byte
	if r.Method == http.MethodPost {
		var err error
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				writeError(w, http.StatusRequestEntityTooLarge, "Request body is larger than 16777216 bytes.", "")
				return
			}
			writeError(w, http.StatusBadRequest, "Could not read the request body.", "")
			return
		}
		s.mu.Lock()
		s.requests[r.URL.Path] = append(s.requests[r.URL.Path], bytes.Clone(body))
		s.headers[r.URL.Path] = append(s.headers[r.URL.Path], r.Header.Clone())
		s.mu.Unlock()
	}

	s.mu.Lock()
	f, fail := s.failNext[r.URL.Path]
	delete(s.failNext, r.URL.Path)
	s.mu.Unlock()
	if fail {
		writeError(w, f.status, f.message, "")
		return
	}
	route.handle(w, r, body)
}

type route struct {
	method string
	handle func(http.ResponseWriter, *http.Request, []byte)
}

// route finds the handler of path. vLLM registers the generation routes
// only when the model generates and the pooling routes only when it
// pools, so the other kind's paths are plain FastAPI 404s.
func (s *Server) route(path string) (route, bool) {
	switch path {
	case "/health":
		return route{http.MethodGet, func(w http.ResponseWriter, _ *http.Request, _ []byte) { w.WriteHeader(http.StatusOK) }}, true
	case "/v1/models":
		return route{http.MethodGet, s.handleModels}, true
	case "/tokenize":
		return route{http.MethodPost, s.handleTokenize}, true
	case "/v1/chat/completions":
		if s.serves(false) {
			return route{http.MethodPost, s.handleChat}, true
		}
	case "/v1/embeddings":
		if s.serves(true) {
			return route{http.MethodPost, s.handleEmbeddings}, true
		}
	}
	return route{}, false
}

func (s *Server) serves(embedding bool) bool {
	for _, m := range s.served() {
		if m.Embedding == embedding {
			return true
		}
	}
	return false
}

// model resolves a request's model: absent or null means the served model
// (the first one of the kind the path needs), as in vLLM.
func (s *Server) model(name *string, embedding bool) (Model, bool) {
	for _, m := range s.served() {
		if name == nil && m.Embedding == embedding {
			return m, true
		}
		if name != nil && m.ID == *name {
			return m, true
		}
	}
	return Model{}, false
}

func guarded(path string) bool {
	for _, p := range guardedPrefixes {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// bearerOK checks the Authorization header as vLLM's middleware does:
// scheme "bearer" in any case, one space, then the exact key.
func bearerOK(r *http.Request, key string) bool {
	scheme, param, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	return strings.EqualFold(scheme, "bearer") && param == key
}

func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request, _ []byte) {
	created := time.Now().Unix()
	models := s.served()
	data := make([]any, 0, len(models))
	for _, m := range models {
		data = append(data, obj{
			{"id", m.ID},
			{"object", openai.ObjectModel},
			{"created", created},
			{"owned_by", "vllm"},
			{"root", m.ID}, // the model path; the served name is the path here
			{"parent", nil},
			{"max_model_len", m.maxLen()},
			{"permission", []any{obj{
				{"id", "modelperm-" + randomHex()},
				{"object", "model_permission"},
				{"created", created},
				{"allow_create_engine", false},
				{"allow_sampling", true},
				{"allow_logprobs", true},
				{"allow_search_indices", false},
				{"allow_view", true},
				{"allow_fine_tuning", false},
				{"organization", "*"},
				{"group", nil},
				{"is_blocking", false},
			}}},
		})
	}
	writeJSON(w, http.StatusOK, obj{{"object", openai.ObjectList}, {"data", data}})
}

// errorBody is vLLM's ErrorResponse.
func errorBody(status int, message, param string) obj {
	var p any
	if param != "" {
		p = param
	}
	return obj{{"error", obj{
		{"message", message},
		{"type", errorType(status)},
		{"param", p},
		{"code", status},
	}}}
}

// errorType names an error status as vLLM's create_error_response does.
func errorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "BadRequestError"
	case http.StatusNotFound:
		return "NotFoundError"
	case http.StatusUnprocessableEntity:
		return "UnprocessableEntityError"
	case http.StatusInternalServerError:
		return "InternalServerError"
	case http.StatusNotImplemented:
		return "NotImplementedError"
	}
	return http.StatusText(status) // vLLM's GracefulHTTPError uses the phrase
}

func writeError(w http.ResponseWriter, status int, message, param string) {
	writeJSON(w, status, errorBody(status, message, param))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b := mustMarshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func randomHex() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
