package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/proto"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/limits"
	"github.com/tollgate-dev/tollgate/server/policy"
)

// MaxCompletionPrompts bounds the prompts of one legacy completion (prompt
// as an array of strings): each is a whole engine call, made one after
// another within the one request (docs/gateway-api.md).
const MaxCompletionPrompts = 16

// CompletionChats are the chat requests an engine is asked for a legacy
// completion (POST /v1/completions): the engines speak chat completions
// only, so each prompt becomes the one user message of a chat of its own,
// and the model answers it through its chat template
// (docs/gateway-api.md). base carries the completion's model and
// sampling; each request is a copy of it with its prompt.
func CompletionChats(base *inferencev1.ChatCompletionRequest, prompts []string) []*inferencev1.ChatCompletionRequest {
	reqs := make([]*inferencev1.ChatCompletionRequest, len(prompts))
	for i, p := range prompts {
		req := base
		if i > 0 {
			req = proto.CloneOf(base)
		}
		req.Messages = []*inferencev1.Message{{
			Role:    inferencev1.Role_ROLE_USER,
			Content: &inferencev1.Message_Text{Text: p},
		}}
		reqs[i] = req
	}
	return reqs
}

// DecideCompletion asks the policy once about a legacy completion of one
// or more prompts (endpoint /v1/completions, a message per prompt, no
// tools) before the model sees anything. The returned filter is for Chat:
// it passes no tool call, since a completion offers no tool.
func (c *Call) DecideCompletion(ctx context.Context, reqs []*inferencev1.ChatCompletionRequest, stream bool) (*ToolFilter, error) {
	if len(reqs) == 0 {
		return nil, Internal(errors.New("a completion without a prompt"))
	}
	c.stream = stream
	req := reqs[0]
	in := policy.Input{Request: policy.Request{
		Endpoint: policy.EndpointCompletions, Model: req.GetModel(), Stream: stream,
		MessageCount: len(reqs), Temperature: req.Temperature, MaxTokens: req.MaxTokens,
	}}
	if _, err := c.decide(ctx, in); err != nil {
		return nil, err
	}
	for _, r := range reqs {
		r.Tools = nil
	}
	return newToolFilter(nil, c.p.log, c.id), nil
}

// ReserveCompletion admits a legacy completion against its key's limits
// once, whatever its prompts: each prompt's reply is bounded as
// ReserveChat bounds a chat's (the request's, the key's and the model's
// bounds, and the default reservation for a key with a TPD), then one
// request is admitted against the RPM, and against the TPD every prompt as
// the engine counts it plus its bound, so that no prompt's reply can be
// charged more than was admitted.
func (c *Call) ReserveCompletion(ctx context.Context, reqs []*inferencev1.ChatCompletionRequest) error {
	if len(reqs) == 1 {
		return c.ReserveChat(ctx, reqs[0])
	}
	if len(reqs) == 0 {
		return Internal(errors.New("a completion without a prompt"))
	}
	modelMax, contextLength, err := c.modelLimits(ctx, reqs[0].GetModel())
	if err != nil {
		return err
	}
	tpd := c.p.cfg.Limits != nil && c.principal.TPD > 0
	var prompt, completion int64
	var src boundSource
	for i, req := range reqs {
		n, s, err := c.bound(ctx, req, tpd, modelMax, contextLength)
		if err != nil {
			return err
		}
		if i == 0 {
			src = s
		}
		prompt, completion = AddTokens(prompt, n), AddTokens(completion, req.GetMaxTokens())
	}
	if !tpd {
		return c.Admit(ctx, 0)
	}
	return c.admitPrompts(ctx, len(reqs), prompt, completion, reqs[0].GetMaxTokens(), src == boundDefault)
}

// admitPrompts admits n prompts of prompt tokens in all plus completion
// tokens of max_tokens (each prompt's maxTokens, or the default
// reservation when defaulted). A refusal by the TPD says what would fit,
// as admitTokens does for one.
func (c *Call) admitPrompts(ctx context.Context, n int, prompt, completion, maxTokens int64, defaulted bool) error {
	reserve := AddTokens(prompt, completion)
	err := c.Admit(ctx, reserve)
	var e *Error
	if !errors.As(err, &e) || e.Denied == nil || e.Denied.Reason != limits.ReasonTPD {
		return err
	}
	left := e.Denied.State.RemainingTokens
	how := "max_tokens " + strconv.FormatInt(maxTokens, 10) + " for each"
	if defaulted {
		how = "max_tokens unset, so the default reservation of up to " + strconv.FormatInt(maxTokens, 10) + " for each"
	}
	msg := fmt.Sprintf("the key's limit of %d tokens per day has %d tokens left today, and this request of %d prompts reserves %d: %d prompt tokens plus %s",
		e.Denied.State.LimitTokens, left, n, reserve, prompt, how)
	if per := (left - prompt) / int64(n); per >= 1 {
		msg += fmt.Sprintf("; set max_tokens to at most %d, send fewer prompts, or retry after the day's reset (00:00 UTC)", per)
	} else {
		msg += "; the prompts alone do not fit: send fewer or shorter ones, or retry after the day's reset (00:00 UTC)"
	}
	e.Message, e.NoRetry = msg, true
	return e
}
