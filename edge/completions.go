package edge

import (
	"context"
	"net/http"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/openai"
	"github.com/tollgate-dev/tollgate/server/pipeline"
)

// completionCall is a decoded legacy completion: the chat request the
// engine is asked for, and what only the edge needs.
type completionCall struct {
	req          *inferencev1.ChatCompletionRequest
	stream       bool
	includeUsage bool
}

// decodeCompletion decodes POST /v1/completions. The prompt is one string
// (or an array holding one string): the engines answer it as the one user
// message of a chat (pipeline.CompletionChat). What a chat cannot carry
// is refused by name: suffix (fill-in-the-middle), several prompts, token
// ids, n, best_of, echo, logprobs.
func decodeCompletion(body []byte, requestID string) (*completionCall, *apiError) {
	var in openai.CompletionRequest
	if err := decodeJSON(body, &in); err != nil {
		return nil, err
	}
	model, aerr := requireModel(in.Model)
	if aerr != nil {
		return nil, aerr
	}
	prompt, aerr := decodePrompt(in.Prompt)
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
			return nil, invalid(f.name, "%s is not supported on /v1/completions; Tollgate returns one choice, without the prompt or log probabilities", f.name)
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
	call := &completionCall{req: pipeline.CompletionChat(out, prompt), stream: in.Stream}
	if in.StreamOptions != nil {
		if !call.stream {
			return nil, invalid("stream_options", "stream_options is only allowed when stream is true")
		}
		call.includeUsage = in.StreamOptions.IncludeUsage
	}
	return call, nil
}

// decodePrompt reads prompt: a non-empty string, or an array of exactly
// one.
func decodePrompt(raw []byte) (string, *apiError) {
	switch firstByte(raw) {
	case 0, 'n':
		return "", invalid("prompt", "prompt is required")
	case '"':
		s, err := jsonString(raw)
		if err != nil {
			return "", invalid("prompt", "prompt: %v", err)
		}
		return checkPrompt("prompt", s)
	case '[':
		var ss []string
		if unmarshal(raw, &ss) != nil {
			return "", invalid("prompt", "prompt must be a string or an array of strings; token ids are not supported")
		}
		if len(ss) != 1 {
			return "", invalid("prompt", "prompt must hold exactly one string; Tollgate completes one prompt per request")
		}
		return checkPrompt("prompt[0]", ss[0])
	}
	return "", invalid("prompt", "prompt must be a string or an array of strings")
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
// same governed steps as a chat: policy (endpoint /v1/completions),
// limits, the engine's chat reply, the audit event.
func (s *Server) completions(w http.ResponseWriter, r *http.Request, rc *requestContext) {
	if !s.readBody(w, r, rc) {
		return
	}
	call, aerr := decodeCompletion(rc.call.RequestBody, rc.id)
	if aerr != nil {
		s.respondError(w, r, rc, aerr)
		return
	}
	rc.call.Model = call.req.GetModel()
	filter, err := rc.call.DecideCompletion(r.Context(), call.req, call.stream)
	if err != nil {
		s.refuse(w, r, rc, err)
		return
	}
	if err := rc.call.ReserveCompletion(r.Context(), call.req); err != nil {
		s.refuse(w, r, rc, err)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	reply, first, ok := s.startReply(ctx, w, r, rc, call.req, filter)
	if !ok {
		return
	}
	if call.stream {
		s.streamCompletion(w, r, rc, call, reply, first)
		return
	}
	acc, ok := s.wholeReply(w, r, rc, reply, first)
	if !ok {
		return
	}
	finish := finishReason(acc.finish)
	u := toUsage(acc.usage)
	s.respondUsed(w, r, rc, pipeline.AddTokens(rc.call.PromptTokens, rc.call.CompletionTokens), mustMarshal(openai.Completion{
		ID: rc.id, Object: openai.ObjectTextCompletion, Created: rc.call.Received().Unix(), Model: call.req.GetModel(),
		Choices: []openai.CompletionChoice{{Text: acc.content.String(), FinishReason: &finish}},
		Usage:   &u,
	}))
}

// streamCompletion relays the reply as text_completion chunks, as OpenAI
// streams a legacy completion: one chunk per piece of text, each with
// "finish_reason":null, then one with empty text and the finish reason,
// the usage chunk ("choices":[]) when include_usage asked for it, then
// [DONE]. There is no role chunk. Errors, the audit event and a cut
// stream are as for a chat stream (streamChat).
func (s *Server) streamCompletion(w http.ResponseWriter, r *http.Request, rc *requestContext, call *completionCall, reply *pipeline.Reply, ev *inferencev1.ChatCompletionResponse) {
	if !s.startStream(w, r, rc) {
		return
	}
	sse := newSSEWriter(w, &rc.out, s.core.Audited())
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
	chunk := func(text string, finish *string) []byte {
		return mustMarshal(openai.Completion{ID: rc.id, Object: openai.ObjectTextCompletion, Created: rc.call.Received().Unix(),
			Model: call.req.GetModel(), Choices: []openai.CompletionChoice{{Text: text, FinishReason: finish}}})
	}
	for {
		if text := ev.GetContent(); text != "" {
			if sse.raw(chunk(text, nil)) != nil {
				return
			}
		}
		if f := ev.GetFinishReason(); f != inferencev1.FinishReason_FINISH_REASON_UNSPECIFIED {
			reason := finishReason(f)
			if sse.raw(chunk("", &reason)) != nil {
				return
			}
			if call.includeUsage {
				u := toUsage(ev.GetUsage())
				if sse.raw(mustMarshal(openai.Completion{ID: rc.id, Object: openai.ObjectTextCompletion, Created: rc.call.Received().Unix(),
					Model: call.req.GetModel(), Choices: []openai.CompletionChoice{}, Usage: &u})) != nil {
					return
				}
			}
			rc.call.Settle(pipeline.AddTokens(rc.call.PromptTokens, rc.call.CompletionTokens))
			recorded = true
			done := []byte(openai.Done)
			sse.keep(done)
			if err := rc.call.Record(r.Context(), http.StatusOK, sse.sent.Bytes()); err != nil {
				e := internalError()
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
