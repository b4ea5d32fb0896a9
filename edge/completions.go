package edge

import (
	"context"
	"fmt"
	"net/http"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/openai"
	"github.com/tollgate-dev/tollgate/server/pipeline"
)

// completionCall is a decoded legacy completion: the chat requests the
// engine is asked for, one per prompt, and what only the edge needs.
type completionCall struct {
	reqs         []*inferencev1.ChatCompletionRequest
	stream       bool
	includeUsage bool
}

// decodeCompletion decodes POST /v1/completions. The prompt is a string
// or an array of up to pipeline.MaxCompletionPrompts strings: the engines
// answer each as the one user message of a chat
// (pipeline.CompletionChats). What a chat cannot carry is refused by
// name: suffix (fill-in-the-middle), token ids, n, best_of, echo,
// logprobs.
func decodeCompletion(body []byte, requestID string) (*completionCall, *apiError) {
	var in openai.CompletionRequest
	if err := decodeJSON(body, &in); err != nil {
		return nil, err
	}
	model, aerr := requireModel(in.Model)
	if aerr != nil {
		return nil, aerr
	}
	prompts, aerr := decodePrompt(in.Prompt)
	if aerr != nil {
		return nil, aerr
	}
	if in.Suffix != nil && *in.Suffix != "" {
		return nil, invalid("suffix", "suffix is not supported by %s: its engine answers a completion as a chat, which has no place for a suffix "+
			"(fill-in-the-middle); send the prompt alone", model)
	}
	for _, f := range []struct {
		name string
		bad  bool
	}{
		{"n", in.N != nil && *in.N != 1},
		{"best_of", in.BestOf != nil && *in.BestOf != 1},
		{"echo", in.Echo != nil && *in.Echo},
		{"logprobs", in.Logprobs != nil},
	} {
		if f.bad {
			return nil, invalid(f.name, "%s is not supported on /v1/completions; Tollgate returns one choice per prompt, without the prompt or log probabilities", f.name)
		}
	}
	out := &inferencev1.ChatCompletionRequest{RequestId: requestID, Model: model}
	if t := in.Temperature; t != nil {
		if *t < 0 || *t > 2 {
			return nil, invalid("temperature", "temperature %v is out of range [0, 2]", *t)
		}
		out.Temperature = t
	}
	if p := in.TopP; p != nil {
		if *p < 0 || *p > 1 {
			return nil, invalid("top_p", "top_p %v is out of range [0, 1]", *p)
		}
		out.TopP = p
	}
	if m := in.MaxTokens; m != nil {
		if *m < 1 {
			return nil, invalid("max_tokens", "max_tokens must be at least 1")
		}
		out.MaxTokens = m
	}
	out.Seed = in.Seed
	if err := decodeStop(in.Stop, out); err != nil {
		return nil, err
	}
	call := &completionCall{reqs: pipeline.CompletionChats(out, prompts), stream: in.Stream}
	if in.StreamOptions != nil {
		if !call.stream {
			return nil, invalid("stream_options", "stream_options is only allowed when stream is true")
		}
		call.includeUsage = in.StreamOptions.IncludeUsage
	}
	return call, nil
}

// decodePrompt reads prompt: a non-empty string, or an array of 1 to
// pipeline.MaxCompletionPrompts non-empty strings.
func decodePrompt(raw []byte) ([]string, *apiError) {
	switch firstByte(raw) {
	case 0, 'n':
		return nil, invalid("prompt", "prompt is required")
	case '"':
		s, err := jsonString(raw)
		if err != nil {
			return nil, invalid("prompt", "prompt: %v", err)
		}
		if _, aerr := checkPrompt("prompt", s); aerr != nil {
			return nil, aerr
		}
		return []string{s}, nil
	case '[':
		var ss []string
		if unmarshal(raw, &ss) != nil {
			return nil, invalid("prompt", "prompt must be a string or an array of strings; token ids are not supported")
		}
		switch {
		case len(ss) == 0:
			return nil, invalid("prompt", "prompt must hold at least one string")
		case len(ss) > pipeline.MaxCompletionPrompts:
			return nil, invalid("prompt", "prompt holds %d strings; Tollgate completes at most %d prompts per request", len(ss), pipeline.MaxCompletionPrompts)
		}
		for i, p := range ss {
			if _, aerr := checkPrompt(fmt.Sprintf("prompt[%d]", i), p); aerr != nil {
				return nil, aerr
			}
		}
		return ss, nil
	}
	return nil, invalid("prompt", "prompt must be a string or an array of strings")
}

func checkPrompt(param, s string) (string, *apiError) {
	if s == "" {
		return "", invalid(param, "%s must not be empty", param)
	}
	if len(s) > maxTextBytes {
		return "", tooLong(param, len(s))
	}
	return s, nil
}

// completions serves POST /v1/completions, plain or streamed, through the
// same governed steps as a chat, once for all its prompts: policy
// (endpoint /v1/completions), limits (every prompt reserved), then the
// engine's chat reply to each prompt in turn, and one audit event with the
// usage summed.
func (s *Server) completions(w http.ResponseWriter, r *http.Request, rc *requestContext) {
	if !s.readBody(w, r, rc) {
		return
	}
	call, aerr := decodeCompletion(rc.call.RequestBody, rc.id)
	if aerr != nil {
		s.respondError(w, r, rc, aerr)
		return
	}
	rc.call.Model = call.reqs[0].GetModel()
	filter, err := rc.call.DecideCompletion(r.Context(), call.reqs, call.stream)
	if err != nil {
		s.refuse(w, r, rc, err)
		return
	}
	if err := rc.call.ReserveCompletion(r.Context(), call.reqs); err != nil {
		s.refuse(w, r, rc, err)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	reply, first, ok := s.startReply(ctx, w, r, rc, call.reqs[0], filter)
	if !ok {
		return
	}
	if call.stream {
		s.streamCompletion(ctx, w, r, rc, call, filter, reply, first)
		return
	}
	choices := make([]openai.CompletionChoice, len(call.reqs))
	var used usageSum
	for i := range call.reqs {
		var acc *accumulator
		if i > 0 {
			reply, first, err = rc.call.Chat(ctx, call.reqs[i], filter)
		}
		if err == nil {
			acc, err = readWhole(reply, first)
		}
		if err != nil {
			// The prompts answered before are charged (the call's
			// usage is their sum); the refusal then settles nothing
			// more.
			rc.call.Settle(pipeline.AddTokens(used.prompt, used.completion))
			s.refuse(w, r, rc, err)
			return
		}
		used.add(rc.call, acc.usage)
		finish := finishReason(acc.finish)
		choices[i] = openai.CompletionChoice{Text: acc.content.String(), Index: i, FinishReason: &finish}
	}
	u := toUsage(used.usage())
	s.respondUsed(w, r, rc, pipeline.AddTokens(rc.call.PromptTokens, rc.call.CompletionTokens), mustMarshal(openai.Completion{
		ID: rc.id, Object: openai.ObjectTextCompletion, Created: rc.call.Received().Unix(), Model: rc.call.Model,
		Choices: choices, Usage: &u,
	}))
}

// usageSum adds up the usage of a completion's prompts. After each
// prompt's reply it leaves the call's usage (which the reply's finish
// event sets to its own) at the sum so far, so that whatever ends the
// request records and settles every prompt answered.
type usageSum struct{ prompt, completion int64 }

func (u *usageSum) add(c *pipeline.Call, one *inferencev1.Usage) {
	u.prompt = pipeline.AddTokens(u.prompt, one.GetPromptTokens())
	u.completion = pipeline.AddTokens(u.completion, one.GetCompletionTokens())
	c.PromptTokens, c.CompletionTokens = u.prompt, u.completion
}

func (u *usageSum) usage() *inferencev1.Usage {
	return &inferencev1.Usage{PromptTokens: u.prompt, CompletionTokens: u.completion}
}

// streamCompletion relays the replies as text_completion chunks, as OpenAI
// streams a legacy completion: one chunk per piece of text, each with
// "finish_reason":null, then one with empty text and the finish reason,
// each chunk's choice carrying its prompt's index; the prompts are
// answered one after another, so the chunks of prompt 0 all come first.
// Then the usage chunk ("choices":[], summed over the prompts) when
// include_usage asked for it, then [DONE]. There is no role chunk.
// Errors, the audit event and a cut stream are as for a chat stream
// (streamChat); a prompt the engine refuses after the first has been
// answered ends the stream with an error event.
func (s *Server) streamCompletion(ctx context.Context, w http.ResponseWriter, r *http.Request, rc *requestContext, call *completionCall,
	filter *pipeline.ToolFilter, reply *pipeline.Reply, ev *inferencev1.ChatCompletionResponse) {
	if !s.startStream(w, r, rc) {
		return
	}
	sse := newSSEWriter(w, &rc.out, s.core.Audited())
	// The reply of the choice being written: each choice has its own.
	sse.more = func() bool { return reply.Ready() }
	defer func() {
		if sse.err != nil {
			abort()
		}
	}()
	defer s.count(rc, http.StatusOK)
	recorded := false
	defer func() {
		if !recorded {
			_ = rc.call.Record(r.Context(), http.StatusOK, sse.sent.Bytes())
		}
	}()
	chunk := func(index int, text string, finish *string) []byte {
		return mustMarshal(openai.Completion{ID: rc.id, Object: openai.ObjectTextCompletion, Created: rc.call.Received().Unix(),
			Model: rc.call.Model, Choices: []openai.CompletionChoice{{Text: text, Index: index, FinishReason: finish}}})
	}
	var used usageSum
	for i := 0; ; {
		if text := ev.GetContent(); text != "" {
			if sse.raw(chunk(i, text, nil)) != nil {
				return
			}
		}
		if f := ev.GetFinishReason(); f != inferencev1.FinishReason_FINISH_REASON_UNSPECIFIED {
			reason := finishReason(f)
			if sse.raw(chunk(i, "", &reason)) != nil {
				return
			}
			used.add(rc.call, ev.GetUsage())
			if i++; i < len(call.reqs) {
				var err error
				if reply, ev, err = rc.call.Chat(ctx, call.reqs[i], filter); err != nil {
					recorded = true
					s.streamError(r, sse, rc, err)
					return
				}
				continue
			}
			if call.includeUsage {
				u := toUsage(used.usage())
				if sse.raw(mustMarshal(openai.Completion{ID: rc.id, Object: openai.ObjectTextCompletion, Created: rc.call.Received().Unix(),
					Model: rc.call.Model, Choices: []openai.CompletionChoice{}, Usage: &u})) != nil {
					return
				}
			}
			rc.call.Settle(pipeline.AddTokens(rc.call.PromptTokens, rc.call.CompletionTokens))
			recorded = true
			done := []byte(openai.Done)
			sse.keep(done)
			if err := rc.call.Record(r.Context(), http.StatusOK, sse.sent.Bytes()); err != nil {
				e := recordError(nil, err)
				e.RequestID = rc.id
				_ = sse.event(e.envelope())
				return
			}
			_ = sse.raw(done)
			return
		}
		var err error
		if ev, err = reply.Next(); err != nil {
			recorded = true
			s.streamError(r, sse, rc, err)
			return
		}
	}
}
