// Package inference implements InferenceService: it routes a model id
// <namespace>/<model_name> to the engine registered for that namespace.
package inference

import (
	"context"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
)

// Engine serves the models of one namespace.
type Engine interface {
	// Namespace is the part of a model id before the first '/'.
	Namespace() string
	// Models lists the engine's loaded models, ids fully qualified.
	Models() []*inferencev1.Model
	// ChatCompletion produces the reply by calling send for each event, in
	// order, ending with one event that carries finish_reason and usage. It
	// stops early, returning ctx.Err(), when ctx is cancelled.
	ChatCompletion(ctx context.Context, req *inferencev1.ChatCompletionRequest, send func(*inferencev1.ChatCompletionResponse) error) error
	// Embed returns one embedding per input. Unsupported models or
	// arguments are errors carrying a gRPC status.
	Embed(ctx context.Context, req *inferencev1.EmbedRequest) (*inferencev1.EmbedResponse, error)
	// CountTokens returns the prompt tokens the engine will count for a
	// chat request of req's messages and tools, exactly, so limits can
	// reserve before generation, and the model's context length.
	CountTokens(ctx context.Context, req *inferencev1.CountTokensRequest) (*inferencev1.CountTokensResponse, error)
}

// ModelFinder finds one model by id without listing them all: an Engine
// that can (Service.Model asks it; an engine without it is listed), and
// LocalClient (the pipeline asks it on every chat request).
type ModelFinder interface {
	// Model returns the loaded model of that fully qualified id.
	Model(id string) (*inferencev1.Model, bool)
}
