// Package vllm is the engine for a model server that speaks vLLM's
// OpenAI-compatible HTTP API: the GPU inference server an appliance runs
// beside Tollgate. It serves the models the server lists under a namespace
// of the appliance's choosing (namespace/<the server's model id>), turning
// InferenceService calls into the server's /v1/chat/completions (always
// streamed, with usage), /v1/embeddings and /tokenize calls.
//
// The server counts the prompt tokens (its /tokenize renders the chat
// template exactly as a completion does), so limits reserve exactly what
// the completion will report. Its behaviour is specified in
// docs/engines.md.
package vllm

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/ids"
	"github.com/tollgate-dev/tollgate/server/inference"
)

// DefaultRefreshInterval is how often the model list is read again.
const DefaultRefreshInterval = 30 * time.Second

// Config describes one model server.
type Config struct {
	// Namespace is the part of the model ids before the first '/'.
	Namespace string
	// URL is the server's base address, such as http://10.0.0.5:8000
	// (the /v1 paths are added).
	URL string
	// Embedding says the server's models serve embeddings; otherwise they
	// serve chat completions. A vLLM server runs one model for one task.
	Embedding bool
	// APIKey, when set, is sent as a bearer token (vLLM's --api-key).
	APIKey string
	// RefreshInterval is how often Run reads the model list
	// (0: DefaultRefreshInterval).
	RefreshInterval time.Duration
	// Client makes the calls (nil: NewClient(nil)).
	Client *http.Client
	// Metrics, shared by the engines of an appliance; nil records none.
	Metrics *Metrics
	Logger  *slog.Logger
}

// Engine serves the models of one vLLM server.
type Engine struct {
	cfg  Config
	rt   *Transport // cfg.Client's, called directly (roundTripper); nil: cfg.Client
	auth []string   // the Authorization header's value; nil without an API key
	base string     // the server's URL, without a trailing slash
	// chatURL is base's chat completions URL, made once: every chat
	// request posts to it.
	chatURL string
	kind    inferencev1.ModelKind

	mu     sync.RWMutex
	models map[string]*inferencev1.Model // by full id
	// started numbers the model-list reads; listedBy is the number of
	// the read models came from (mu held), so that a read that started
	// earlier never replaces what a later one listed.
	started  atomic.Uint64
	listedBy uint64

	refreshing atomic.Bool // a refreshSoon runs
}

var _ inference.Engine = (*Engine)(nil)

// New returns an engine for cfg. It lists no model until Refresh has read
// the server's list.
func New(cfg Config) (*Engine, error) {
	if !ids.ValidModelNamespace(cfg.Namespace) {
		return nil, fmt.Errorf("vllm: namespace %q must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", cfg.Namespace)
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("vllm: %s: the server's URL must be http:// or https://host[:port][/path], got %q", cfg.Namespace, cfg.URL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = DefaultRefreshInterval
	}
	if cfg.Client == nil {
		cfg.Client = NewClient(nil)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	kind := inferencev1.ModelKind_MODEL_KIND_CHAT
	if cfg.Embedding {
		kind = inferencev1.ModelKind_MODEL_KIND_EMBEDDING
	}
	e := &Engine{cfg: cfg, rt: roundTripper(cfg.Client), base: u.String(), kind: kind, models: map[string]*inferencev1.Model{}}
	e.chatURL = e.base + "/v1/chat/completions"
	if cfg.APIKey != "" {
		e.auth = []string{"Bearer " + cfg.APIKey}
	}
	return e, nil
}

// NewClient returns an HTTP client for engines, over a Transport: a
// bounded pool of kept-alive connections per server, connection setup
// (and a TLS handshake) bounded by 5 s, a reply not (a completion lasts as
// long as its request's context). roots are the CAs an https:// server's
// certificate must chain to; nil means the system's. No proxy: the model
// server is on the appliance's own network. No Accept-Encoding: a model
// server sends no compressed reply unless asked (and a compressed stream
// would be held back by its compressor).
func NewClient(roots *x509.CertPool) *http.Client {
	return &http.Client{Transport: &Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
	}}
}

// roundTripper is the Transport of c when c adds nothing to it (no
// timeout, cookie jar or redirect policy), so that the engine calls it
// without http.Client's work per request (copying the request's headers
// for redirects, its deadline bookkeeping); else nil, and c is used.
func roundTripper(c *http.Client) *Transport {
	t, ok := c.Transport.(*Transport)
	if !ok || c.Timeout != 0 || c.Jar != nil || c.CheckRedirect != nil {
		return nil
	}
	return t
}

// Namespace implements inference.Engine.
func (e *Engine) Namespace() string { return e.cfg.Namespace }

// Models implements inference.Engine: the models of the last list read,
// in no order (the service sorts every engine's together).
func (e *Engine) Models() []*inferencev1.Model {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]*inferencev1.Model, 0, len(e.models))
	for _, m := range e.models {
		out = append(out, m)
	}
	return out
}

// Model implements inference.ModelFinder: the model of that id in the
// last list read.
func (e *Engine) Model(id string) (*inferencev1.Model, bool) {
	e.mu.RLock()
	m, ok := e.models[id]
	e.mu.RUnlock()
	return m, ok
}

var _ inference.ModelFinder = (*Engine)(nil)

// Run reads the model list every RefreshInterval until ctx ends. A failed
// read keeps the last list and is logged; it is not fatal, so that a model
// server restarting does not stop the gateway.
func (e *Engine) Run(ctx context.Context) error {
	t := time.NewTicker(e.cfg.RefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		e.refreshLogged(ctx)
	}
}

// refreshLogged reads the model list within RefreshInterval; a failure,
// unless ctx ended, is logged and the last list kept.
func (e *Engine) refreshLogged(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, e.cfg.RefreshInterval)
	defer cancel()
	if err := e.Refresh(rctx); err != nil && ctx.Err() == nil {
		e.cfg.Logger.Warn("model server: cannot read its model list; keeping the last one",
			"namespace", e.cfg.Namespace, "err", err)
	}
}

// Refresh reads the server's model list (GET /v1/models) and makes it the
// engine's. A model id that cannot be part of a Tollgate model id is left
// out, with a warning.
func (e *Engine) Refresh(ctx context.Context) error {
	read := e.started.Add(1)
	var list modelList
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.base+"/v1/models", nil)
	if err != nil {
		return status.Errorf(codes.Internal, "vllm: %v", err)
	}
	resp, err := e.send(ctx, "models", req, "")
	if err == nil {
		err = decodeBody(resp, maxModelsBytes, &list)
	}
	e.cfg.Metrics.observe(e.cfg.Namespace, "models", err)
	if err != nil {
		e.cfg.Metrics.listed(e.cfg.Namespace, 0, err)
		return err
	}
	models := map[string]*inferencev1.Model{}
	for _, m := range list.Data {
		if !ids.ValidModelName(m.ID) {
			e.cfg.Logger.Warn("model server: model id not servable; left out",
				"namespace", e.cfg.Namespace, "model", m.ID)
			continue
		}
		id := e.cfg.Namespace + "/" + m.ID
		owner := m.OwnedBy
		if owner == "" {
			owner = "vllm"
		}
		// The model's replies are bounded by its context, which vLLM
		// enforces itself; it has no output limit of its own.
		models[id] = &inferencev1.Model{Id: id, Kind: e.kind, OwnedBy: owner, Created: m.Created, ContextLength: max(m.MaxModelLen, 0)}
	}
	e.mu.Lock()
	if read < e.listedBy {
		// A read that started later has listed already: its answer is
		// the newer one.
		e.mu.Unlock()
		return nil
	}
	e.models, e.listedBy = models, read
	e.mu.Unlock()
	e.cfg.Metrics.listed(e.cfg.Namespace, len(models), nil)
	return nil
}

// upstreamModel returns the server's id of model, or the error for a model
// the server does not list or that does not serve kind.
func (e *Engine) upstreamModel(model string, kind inferencev1.ModelKind) (string, error) {
	e.mu.RLock()
	m, ok := e.models[model]
	e.mu.RUnlock()
	if !ok {
		return "", inference.ModelNotLoaded(model)
	}
	if m.GetKind() != kind {
		return "", inference.WrongKind(model, kind)
	}
	return strings.TrimPrefix(model, e.cfg.Namespace+"/"), nil
}
