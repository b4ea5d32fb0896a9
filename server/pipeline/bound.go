package pipeline

import (
	"context"
	"strconv"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/inference"
)

// boundSource says where a reply's bound (the max_tokens the engine is
// given) came from, for the TPD refusal's message.
type boundSource int

const (
	boundNone    boundSource = iota // no bound: the engine's context alone
	boundRequest                    // the client's max_tokens
	boundKey                        // the key's max_output_tokens
	boundModel                      // the model's own output limit
	boundContext                    // the room the model's context leaves
	boundDefault                    // DefaultCompletionReserve, for a TPD
)

// describe says how a reservation's completion part was chosen.
func (s boundSource) describe(n int64) string {
	v := strconv.FormatInt(n, 10)
	switch s {
	case boundKey:
		return "max_tokens " + v + ", the key's maximum a reply"
	case boundModel:
		return "max_tokens " + v + ", the model's output limit"
	case boundContext:
		return "max_tokens " + v + ", the room the model's context leaves"
	case boundDefault:
		return "max_tokens unset, so the default reservation of " + v
	}
	return "max_tokens " + v
}

// modelLimits returns the output limit and context length of model as its
// engine lists them; zeros for a model no engine lists (the engine then
// refuses the request itself). An engine's list is its own cache, read
// again from its model server every refresh period (vllm.Config's
// RefreshInterval), so no request waits for a listing.
func (c *Call) modelLimits(ctx context.Context, model string) (maxOutput, contextLength int64, err error) {
	// inference.LocalClient finds a model with a map lookup in its
	// engine's last list.
	if f, ok := c.p.cfg.Inference.(inference.ModelFinder); ok {
		m, _ := f.Model(model) // nil when not loaded: zeros
		return max(m.GetMaxOutputTokens(), 0), max(m.GetContextLength(), 0), nil
	}
	resp, err := c.p.cfg.Inference.ListModels(ctx, &inferencev1.ListModelsRequest{})
	if err != nil {
		return 0, 0, c.engineError(ctx, "list models", err)
	}
	for _, m := range resp.GetModels() {
		if m.GetId() == model {
			return max(m.GetMaxOutputTokens(), 0), max(m.GetContextLength(), 0), nil
		}
	}
	return 0, 0, nil
}

// capOutput lowers req's max_tokens to limit (when limit > 0 and the
// request asks for more or says nothing), reporting whether it did.
func capOutput(req *inferencev1.ChatCompletionRequest, limit int64) bool {
	if limit <= 0 || (req.MaxTokens != nil && req.GetMaxTokens() <= limit) {
		return false
	}
	req.MaxTokens = &limit
	return true
}
