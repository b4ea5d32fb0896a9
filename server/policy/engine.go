package policy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
)

// Engine makes policy decisions with the active bundle. Decide may be
// called concurrently with itself and with any reload; a reload swaps the
// active bundle atomically, so a decision in flight finishes on the bundle
// it started with.
type Engine struct {
	opts   LoadOptions
	log    *slog.Logger
	active atomic.Pointer[Bundle]
	keys   keyTerms
	// loadMu serialises reloads so two of them cannot race to swap.
	loadMu sync.Mutex
	// memoHits and memoMisses count decisions of memoized bundles that
	// reused an output and that evaluated one, across reloads.
	memoHits, memoMisses atomic.Uint64
}

// Load compiles the bundle at path and returns an engine serving it. It
// fails when that bundle is refused: there is no previous bundle to keep.
// The refusal is not logged: it is the caller's error to report, once.
func Load(ctx context.Context, path string, opts LoadOptions) (*Engine, error) {
	e := &Engine{opts: opts, log: opts.logger()}
	b, err := Compile(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	e.Swap(b)
	return e, nil
}

// Active returns the bundle decisions are currently made with.
func (e *Engine) Active() *Bundle { return e.active.Load() }

// Swap makes b, compiled by Compile with this engine's options, the active
// bundle and returns the previous one. Decisions already running finish on
// the previous bundle.
func (e *Engine) Swap(b *Bundle) *Bundle {
	if b == nil {
		panic("policy: Swap(nil)")
	}
	old := e.active.Swap(b)
	attrs := []slog.Attr{
		slog.String("path", b.path),
		slog.String("bundle_revision", b.revision),
		slog.String("bundle_digest", b.digest),
	}
	if memoized, detail := b.DecisionMemo(); memoized {
		attrs = append(attrs, slog.Bool("decision_memo", true), slog.String("decision_memo_keyed_on", detail))
	} else {
		attrs = append(attrs, slog.Bool("decision_memo", false), slog.String("decision_memo_off", detail))
	}
	if old != nil {
		attrs = append(attrs,
			slog.String("previous_revision", old.revision),
			slog.String("previous_digest", old.digest))
	}
	e.log.LogAttrs(context.Background(), slog.LevelInfo, "policy bundle activated", attrs...)
	return old
}

// Reload reads the active bundle's path again.
func (e *Engine) Reload(ctx context.Context) error {
	return e.ReloadFrom(ctx, e.Active().path)
}

// ReloadFrom compiles the bundle at path and, if it is accepted, makes it
// active. A bundle that cannot be read, fails verification or does not
// compile is refused with an error log line, and the active bundle stays.
func (e *Engine) ReloadFrom(ctx context.Context, path string) error {
	e.loadMu.Lock()
	defer e.loadMu.Unlock()
	b, err := Compile(ctx, path, e.opts)
	if err != nil {
		cur := e.Active()
		e.log.LogAttrs(ctx, slog.LevelError, "policy bundle refused; previous bundle stays active",
			slog.String("path", path),
			slog.String("error", err.Error()),
			slog.String("active_revision", cur.revision),
			slog.String("active_digest", cur.digest))
		return fmt.Errorf("%w: %w", ErrBundleRefused, err)
	}
	e.Swap(b)
	return nil
}

// ErrBundleRefused is wrapped by the error of a reload whose bundle was
// refused while the previous one stays active.
var ErrBundleRefused = errors.New("policy: bundle refused, previous bundle stays active")
