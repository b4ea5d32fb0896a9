package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"google.golang.org/grpc"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/limits"
	"github.com/tollgate-dev/tollgate/server/policy"
)

// DefaultCompletionReserve is the completion tokens reserved against a key's
// TPD budget when neither the request's max_tokens nor the key's maximum
// bounds the reply, and then the engine's max_tokens (unless the model's
// own limit or context is less), so that the reply stays within it; the
// difference to the real usage is returned when the request ends
// (docs/limits.md).
const DefaultCompletionReserve = 4096

// ChatOptions are what a chat request says beyond its message.
type ChatOptions struct {
	// Stream: the reply is sent as it is produced (told to the policy).
	Stream bool
	// OneToolCall: parallel_tool_calls false, so at most one tool call
	// reaches the client.
	OneToolCall bool
}

// DecideChat asks the policy about a chat request before the model sees
// anything. An allow may narrow req's tools; the returned filter keeps the
// reply's tool calls to the tools exposed (Chat applies it).
func (c *Call) DecideChat(ctx context.Context, req *inferencev1.ChatCompletionRequest, opts ChatOptions) (*ToolFilter, error) {
	c.stream = opts.Stream
	in := policy.Input{Request: policy.Request{
		Endpoint: policy.EndpointChatCompletions, Model: req.GetModel(), Stream: opts.Stream,
		ToolChoice: policyToolChoice(req.GetToolChoice()), MessageCount: len(req.GetMessages()),
		Temperature: req.Temperature, MaxTokens: req.MaxTokens, ReasoningEffort: req.ReasoningEffort,
	}}
	for _, t := range req.GetTools() {
		in.Request.Tools = append(in.Request.Tools, t.GetName())
	}
	d, err := c.decide(ctx, in)
	if err != nil {
		return nil, err
	}
	if d.Narrowed {
		req.Tools = slices.DeleteFunc(req.Tools, func(t *inferencev1.Tool) bool { return !d.Exposes(t.GetName()) })
	}
	f := newToolFilter(req.GetTools(), c.p.log, c.id)
	if opts.OneToolCall {
		f.max = 1
	}
	return f, nil
}

// ReserveChat bounds a chat request's reply and admits it against its
// key's limits (docs/limits.md). The bound, set as req's max_tokens so
// that the engine is asked for no more, is the smallest of the request's
// max_tokens, the key's max_output_tokens and the model's own output
// limit; a bound the request did not ask for exactly is lowered further to
// the room the model's context leaves after the prompt, where the model
// has a context length (the client's own max_tokens is left for the
// engine to judge, as vLLM and OpenAI refuse one too large). A reply cut
// at its bound finishes with length.
//
// A key with a TPD then reserves the engine's exact prompt count plus the
// bound; with no bound at all, DefaultCompletionReserve (or the context's
// room, if less) becomes the bound, so that a reply can never be charged
// more than was admitted. The sum saturates: a max_tokens near the int64
// limit makes a reservation no day can hold (429), not a negative one. The
// prompt is counted only when a TPD or the context's room needs it.
func (c *Call) ReserveChat(ctx context.Context, req *inferencev1.ChatCompletionRequest) error {
	modelMax, contextLength, err := c.modelLimits(ctx, req.GetModel())
	if err != nil {
		return err
	}
	tpd := c.p.cfg.Limits != nil && c.principal.TPD > 0
	prompt, src, err := c.bound(ctx, req, tpd, modelMax, contextLength)
	if err != nil {
		return err
	}
	if !tpd {
		return c.Admit(ctx, 0)
	}
	return c.admitTokens(ctx, prompt, req.GetMaxTokens(), src)
}

// bound sets req's max_tokens to its reply's bound (ReserveChat) given the
// model's output limit and context length as its engine lists them, and
// returns the prompt's token count when it had to be counted (always when
// tpd, the key having a TPD) and where the bound came from.
func (c *Call) bound(ctx context.Context, req *inferencev1.ChatCompletionRequest, tpd bool, modelMax, contextLength int64) (int64, boundSource, error) {
	src := boundNone
	if req.MaxTokens != nil {
		src = boundRequest
	}
	if capOutput(req, c.principal.MaxOutputTokens) {
		src = boundKey
	}
	if tpd && req.MaxTokens == nil {
		r := int64(DefaultCompletionReserve)
		req.MaxTokens, src = &r, boundDefault
	}
	if capOutput(req, modelMax) {
		src = boundModel
	}
	// A bound the client did not ask for must fit the model's context.
	ours := src != boundNone && src != boundRequest
	if fit := ours && contextLength > 0; !tpd && !fit {
		return 0, src, nil
	}
	resp, err := c.p.cfg.Inference.CountTokens(ctx, &inferencev1.CountTokensRequest{
		Model: req.GetModel(), Messages: req.GetMessages(), Tools: req.GetTools(),
		ChatTemplateKwargsJson: req.GetChatTemplateKwargsJson(),
		ReasoningEffort:        req.ReasoningEffort,
	})
	if err != nil {
		return 0, src, c.engineError(ctx, "count tokens", err)
	}
	prompt := max(resp.GetPromptTokens(), 0)
	if n := resp.GetContextLength(); n > 0 {
		contextLength = n
	}
	if room := contextLength - prompt; ours && contextLength > 0 && room >= 1 && capOutput(req, room) {
		src = boundContext
	}
	return prompt, src, nil
}

// admitTokens admits a reservation of prompt plus maxTokens (chosen as src
// says). A refusal by the TPD says what would fit: the day's Retry-After
// is hours away, which no SDK waits for, and the fix is most often a
// smaller max_tokens; it is marked NoRetry.
func (c *Call) admitTokens(ctx context.Context, prompt, maxTokens int64, src boundSource) error {
	err := c.Admit(ctx, AddTokens(prompt, maxTokens))
	var e *Error
	if !errors.As(err, &e) || e.Denied == nil || e.Denied.Reason != limits.ReasonTPD {
		return err
	}
	left := e.Denied.State.RemainingTokens
	msg := fmt.Sprintf("the key's limit of %d tokens per day has %d tokens left today, and this request reserves %d: %d prompt tokens plus %s",
		e.Denied.State.LimitTokens, left, AddTokens(prompt, maxTokens), prompt, src.describe(maxTokens))
	if prompt < left {
		msg += fmt.Sprintf("; set max_tokens to at most %d, or retry after the day's reset (00:00 UTC)", left-prompt)
	} else {
		msg += "; the prompt alone does not fit: shorten it, or retry after the day's reset (00:00 UTC)"
	}
	e.Message, e.NoRetry = msg, true
	return e
}

// engineError maps a failed engine call, logging what the client is not
// told (an internal failure while the client still waits).
func (c *Call) engineError(ctx context.Context, op string, err error) *Error {
	e := AsError(err)
	if e.Kind == KindInternal && !e.Logged && ctx.Err() == nil {
		c.p.log.Warn("internal call failed", "op", op, "request_id", c.id, "err", err)
		e.Logged = true
	}
	return e
}

// errEmptyReply is an engine ending a reply without its finish event.
var errEmptyReply = errors.New("engine ended the reply without a finish event")

// Reply is a chat reply as it is produced: the engine's events with the
// tool calls kept to the tools exposed. Each tool-call piece the client
// sees has the client's index (0, 1, … over the calls that pass); the
// first piece of a call carries its id and name, the others neither. A
// reply whose tool calls were all dropped finishes stop, not tool_calls.
type Reply struct {
	call    *Call
	stream  grpc.ServerStreamingClient[inferencev1.ChatCompletionResponse]
	filter  *ToolFilter
	calls   int   // tool calls passed to the client
	pending error // a broken piece, returned by the next Next
	done    bool
}

// Chat calls the engine and waits for the first event of its reply before
// returning, so that a refusal by the engine is an ordinary error and not
// a broken reply. The engine call ends with ctx.
func (c *Call) Chat(ctx context.Context, req *inferencev1.ChatCompletionRequest, filter *ToolFilter) (*Reply, *inferencev1.ChatCompletionResponse, error) {
	req.RequestId = c.id
	// A stream's start syncs while the engine is asked; Start waits for
	// it before the first byte.
	c.beginStart(ctx)
	ctx, c.engine = c.startSpan(ctx, "engine")
	stream, err := c.p.cfg.Inference.ChatCompletion(ctx, req, c.chatOptions()...)
	if err != nil {
		c.endEngine(err)
		return nil, nil, c.engineError(ctx, "chat completion", err)
	}
	r := &Reply{call: c, stream: stream, filter: filter}
	first, err := r.Next()
	if err != nil {
		return nil, nil, err
	}
	return r, first, nil
}

// Next returns the reply's next event (filtered), an *Error when the
// engine failed or broke a tool call (a piece changing its call is
// refused before it reaches the client, and logged), and io.EOF after the
// finish event. The finish event sets the call's usage.
func (r *Reply) Next() (*inferencev1.ChatCompletionResponse, error) {
	if r.pending != nil {
		err := r.pending
		r.pending = nil
		return nil, err
	}
	if r.done {
		return nil, io.EOF
	}
	ev, err := r.stream.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = errEmptyReply
		}
		e := AsError(err)
		r.call.endEngine(e)
		// Not logged here: the front says how far the reply got.
		return nil, e
	}
	owned := false // ev is the pipeline's own, not the engine's
	if len(ev.GetToolCalls()) > 0 {
		owned = true
		out := &inferencev1.ChatCompletionResponse{Content: ev.GetContent(), Reasoning: ev.GetReasoning(),
			FinishReason: ev.GetFinishReason(), Usage: ev.GetUsage()}
		for _, d := range ev.GetToolCalls() {
			i, id, name, err := r.filter.pass(d)
			if err != nil {
				// What came before the broken piece is sent; the
				// reply fails on the next call.
				e := Internal(err)
				e.Logged = true
				r.pending = e
				out.FinishReason, out.Usage = inferencev1.FinishReason_FINISH_REASON_UNSPECIFIED, nil
				return out, nil
			}
			if i < 0 {
				continue
			}
			nd := &inferencev1.ToolCallDelta{Index: int32(i), Arguments: d.GetArguments()}
			if id != "" {
				nd.Id, nd.Name = id, name
				r.calls++
			}
			out.ToolCalls = append(out.ToolCalls, nd)
		}
		ev = out
	}
	if f := ev.GetFinishReason(); f != inferencev1.FinishReason_FINISH_REASON_UNSPECIFIED {
		if f == inferencev1.FinishReason_FINISH_REASON_TOOL_CALLS && r.calls == 0 {
			if !owned {
				ev = cloneFinish(ev)
			}
			ev.FinishReason = inferencev1.FinishReason_FINISH_REASON_STOP
		}
		r.done = true
		r.call.endEngine(nil)
		r.call.PromptTokens, r.call.CompletionTokens = ev.GetUsage().GetPromptTokens(), ev.GetUsage().GetCompletionTokens()
	}
	return ev, nil
}

// Ready reports whether Next returns without waiting for the engine: an
// event it has produced is already buffered (an in-process reply read
// whole), or a failure is pending. A stream's writer flushes only when it
// is not, so that none waits unflushed while the engine works. False when
// unknown or nothing is buffered: an engine over gRPC, and an in-process
// stream, whose engine produces the next event only when Next asks.
func (r *Reply) Ready() bool {
	if r.pending != nil {
		return true
	}
	if r.done {
		return false
	}
	b, ok := r.stream.(interface{ Buffered() int })
	return ok && b.Buffered() > 0
}

// Done reports whether the finish event has been returned.
func (r *Reply) Done() bool { return r.done }

// cloneFinish copies an engine's event before it is changed: the engine
// may keep what it sent.
func cloneFinish(ev *inferencev1.ChatCompletionResponse) *inferencev1.ChatCompletionResponse {
	return &inferencev1.ChatCompletionResponse{Content: ev.GetContent(), Reasoning: ev.GetReasoning(),
		FinishReason: ev.GetFinishReason(), Usage: ev.GetUsage(), ToolCalls: ev.GetToolCalls()}
}

func policyToolChoice(tc *inferencev1.ToolChoice) policy.ToolChoice {
	switch tc.GetMode() {
	case inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_NONE:
		return policy.ToolChoice{Mode: policy.ToolChoiceNone}
	case inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_AUTO:
		return policy.ToolChoice{Mode: policy.ToolChoiceAuto}
	case inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED:
		return policy.ToolChoice{Mode: policy.ToolChoiceRequired}
	case inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_FUNCTION:
		return policy.ToolChoice{Mode: policy.ToolChoiceFunction, Name: tc.GetFunctionName()}
	}
	return policy.ToolChoice{}
}
