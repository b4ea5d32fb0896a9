// Package builtin is Tollgate's built-in engine. It serves two deterministic
// models that tests everywhere rely on and that need no GPU:
//
//   - builtin/echo (chat) replies with the last user message; see chat.go.
//   - builtin/embed (embeddings) hashes character 3-grams; see embed.go.
//
// Its behaviour is specified in docs/builtin-engine.md.
package builtin

import (
	"context"
	"time"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/inference"
)

const (
	// Namespace of the built-in models.
	Namespace = "builtin"
	// EchoModel is the chat model.
	EchoModel = Namespace + "/echo"
	// EmbedModel is the embeddings model.
	EmbedModel = Namespace + "/embed"
	ownedBy    = "tollgate"
	// EchoMaxOutputTokens is the most tokens one reply of builtin/echo
	// has, whatever its max_tokens: a model's own output limit, so that an
	// echo of a huge message is not a huge reply (docs/builtin-engine.md).
	EchoMaxOutputTokens = 8192
)

// Engine serves builtin/echo and builtin/embed.
type Engine struct {
	loaded int64
	// sleep waits between streamed pieces for /delay; replaced in tests.
	sleep func(ctx context.Context, d time.Duration) error
}

var _ inference.Engine = (*Engine)(nil)

// New returns the built-in engine, its models loaded now.
func New() *Engine {
	return &Engine{loaded: time.Now().Unix(), sleep: sleepCtx}
}

// Namespace implements inference.Engine.
func (e *Engine) Namespace() string { return Namespace }

// Models implements inference.Engine.
func (e *Engine) Models() []*inferencev1.Model {
	return []*inferencev1.Model{
		{Id: EchoModel, Kind: inferencev1.ModelKind_MODEL_KIND_CHAT, OwnedBy: ownedBy, Created: e.loaded, MaxOutputTokens: EchoMaxOutputTokens},
		{Id: EmbedModel, Kind: inferencev1.ModelKind_MODEL_KIND_EMBEDDING, OwnedBy: ownedBy, Created: e.loaded},
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
