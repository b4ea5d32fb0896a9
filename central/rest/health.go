package rest

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/tollgate-dev/tollgate/central/apierr"
)

// Health routes: what a load balancer or a supervisor asks, without a
// token (they say whether the replica serves, nothing of what it holds).
const (
	// HealthzPath is readiness: 200 while the store answers and the
	// plane is not stopping, 503 otherwise. A balancer sends traffic to
	// a replica while it answers 200. The appliance's gateway serves the
	// same path with the same meaning.
	HealthzPath = "/healthz"
	// LivezPath is liveness: 200 whenever the process answers HTTP, the
	// store and a stop notwithstanding. A supervisor restarts a replica
	// that does not answer it; restarting does not fix an unreachable
	// database, so liveness does not ask it.
	LivezPath = "/livez"
)

// DefaultHealthTimeout bounds the store's answer to a readiness check: a
// store slower than this is not ready.
const DefaultHealthTimeout = time.Second

// healthMaxAge is how long a check's result answers the checks that
// follow it: a flood of unauthenticated probes costs the database at most
// one round trip every healthMaxAge, and holds at most one of its
// connections (probes that arrive while a check runs wait for it).
const healthMaxAge = 250 * time.Millisecond

// Health answers the health routes (WithHealth).
type Health struct {
	ping    func(context.Context) error
	timeout time.Duration
	logger  *slog.Logger

	draining atomic.Bool
	flight   singleflight.Group
	mu       sync.Mutex
	checked  time.Time // when the result below was had
	err      error     // the last check's result
}

// NewHealth returns the health routes of a plane whose store answers ping
// (store.Store.Ping) within timeout (0: DefaultHealthTimeout).
func NewHealth(ping func(context.Context) error, timeout time.Duration, logger *slog.Logger) *Health {
	if timeout <= 0 {
		timeout = DefaultHealthTimeout
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Health{ping: ping, timeout: timeout, logger: logger}
}

// Drain makes readiness answer 503 from now on, for good: the plane is
// stopping, and a balancer is to send its traffic elsewhere.
func (h *Health) Drain() { h.draining.Store(true) }

// ready checks the store, or reuses a result younger than healthMaxAge;
// concurrent callers share one check.
func (h *Health) ready(ctx context.Context) error {
	h.mu.Lock()
	if !h.checked.IsZero() && time.Since(h.checked) < healthMaxAge {
		err := h.err
		h.mu.Unlock()
		return err
	}
	h.mu.Unlock()
	ch := h.flight.DoChan("ping", func() (any, error) {
		// Not the request's context: a prober that gives up does not
		// fail the check the others wait for.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.timeout)
		defer cancel()
		err := h.ping(pctx)
		h.mu.Lock()
		wasDown := h.err != nil // only changes are logged
		h.checked, h.err = time.Now(), err
		switch {
		case err != nil && !wasDown:
			h.logger.Warn("central: not ready, the store did not answer", "err", err, "timeout", h.timeout)
		case err == nil && wasDown:
			h.logger.Info("central: ready again, the store answers")
		}
		h.mu.Unlock()
		return nil, err
	})
	select {
	case r := <-ch:
		return r.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// serve answers HealthzPath and LivezPath.
func (h *Health) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, r, http.StatusMethodNotAllowed, apierr.ReasonMethodNotAllowed, apierr.TypeOf(http.StatusMethodNotAllowed),
			"method "+r.Method+" is not allowed on "+r.URL.Path+"; use GET")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	if r.URL.Path == HealthzPath {
		msg := ""
		switch {
		case h.draining.Load():
			msg = "the plane is stopping"
		case h.ready(r.Context()) != nil:
			// The error names addresses and is logged, not sent.
			msg = "the store did not answer"
		}
		if msg != "" {
			writeError(w, r, http.StatusServiceUnavailable, apierr.ReasonUnavailable,
				apierr.TypeOf(http.StatusServiceUnavailable), msg)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}
}

// Option configures Handler.
type Option func(*options)

type options struct{ health *Health }

// WithHealth serves h's routes, HealthzPath and LivezPath, beside the
// API.
func WithHealth(h *Health) Option { return func(o *options) { o.health = h } }
