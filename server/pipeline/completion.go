package pipeline

import (
	"context"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/policy"
)

// CompletionChat is the chat request an engine is asked for a legacy
// completion (POST /v1/completions): the engines speak chat completions
// only, so the prompt becomes the one user message of a chat, and the
// model answers it through its chat template (docs/gateway-api.md). req
// carries the completion's model and sampling; its messages are set here.
func CompletionChat(req *inferencev1.ChatCompletionRequest, prompt string) *inferencev1.ChatCompletionRequest {
	req.Messages = []*inferencev1.Message{{
		Role:    inferencev1.Role_ROLE_USER,
		Content: &inferencev1.Message_Text{Text: prompt},
	}}
	return req
}

// DecideCompletion asks the policy about a legacy completion (endpoint
// /v1/completions, one message, no tools) before the model sees
// anything. The returned filter is for Chat: it passes no tool call,
// since a completion offers no tool.
func (c *Call) DecideCompletion(ctx context.Context, req *inferencev1.ChatCompletionRequest, stream bool) (*ToolFilter, error) {
	in := policy.Input{Request: policy.Request{
		Endpoint: policy.EndpointCompletions, Model: req.GetModel(), Stream: stream,
		MessageCount: len(req.GetMessages()), Temperature: req.Temperature, MaxTokens: req.MaxTokens,
	}}
	if _, err := c.decide(ctx, in); err != nil {
		return nil, err
	}
	req.Tools = nil
	return newToolFilter(nil, c.p.log, c.id), nil
}

// ReserveCompletion admits a legacy completion against its key's limits
// as ReserveChat admits a chat: the prompt as the engine counts it plus
// max_tokens, or the default reservation set as max_tokens.
func (c *Call) ReserveCompletion(ctx context.Context, req *inferencev1.ChatCompletionRequest) error {
	return c.ReserveChat(ctx, req)
}
