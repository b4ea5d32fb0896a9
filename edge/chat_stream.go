package edge

import (
	"net/http"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/openai"
	"github.com/tollgate-dev/tollgate/server/pipeline"
)

// streamChat relays the reply's events as chat.completion.chunk events:
// a first chunk with the assistant role (and, for a reply that opens with
// a tool call, "content":null and that call's first piece), one chunk per content or tool-call
// piece, a finish chunk with an empty delta, the usage chunk when asked
// for, then [DONE]. The audit event is durable before [DONE] is written. An
// error after the 200 is one error event, then close. A stream that breaks
// after the 200 keeps its whole token reservation charged: part of the
// reply reached the client and its true usage is unknown.
func (s *Server) streamChat(w http.ResponseWriter, r *http.Request, rc *requestContext, call *chatCall, reply *pipeline.Reply, ev *inferencev1.ChatCompletionResponse) {
	if !s.startStream(w, r, rc) {
		return
	}
	sse := newSSEWriter(w, &rc.out, s.core.Audited())
	sse.more = reply.Ready
	// Run last: a stream whose write failed is cut, not ended as if
	// complete.
	defer func() {
		if sse.err != nil {
			abort()
		}
	}()
	defer s.count(rc, http.StatusOK)
	enc := newChunkEncoder(rc.id, rc.call.Received().Unix(), call.req.GetModel(), call.includeUsage)
	// Whatever way the stream ends, its event is recorded; on the normal
	// path it was recorded before [DONE].
	recorded := false
	defer func() {
		if !recorded {
			_ = rc.call.Record(r.Context(), http.StatusOK, sse.sent.Bytes())
		}
	}()

	fail := func(err error) {
		recorded = true
		s.streamError(r, sse, rc, err)
	}
	// A reply that opens with a tool call has its first piece in the
	// role chunk, with "content":null, as OpenAI sends it. Events left
	// empty (tool calls to tools not exposed, dropped) are passed over
	// first, so the role chunk knows how the reply opens.
	for isEmpty(ev) {
		next, err := reply.Next()
		if err != nil {
			if sse.raw(enc.role()) == nil {
				fail(err)
			}
			return
		}
		ev = next
	}
	skip := 0
	if calls := ev.GetToolCalls(); len(calls) > 0 && ev.GetContent() == "" && ev.GetReasoning() == "" {
		d := calls[0]
		if sse.raw(enc.roleToolCall(int(d.GetIndex()), d.GetId(), d.GetName(), d.GetArguments())) != nil {
			return
		}
		skip = 1
	} else if sse.raw(enc.role()) != nil {
		return
	}
	for {
		if text := ev.GetReasoning(); text != "" {
			if sse.raw(enc.reasoning(text)) != nil {
				return
			}
		}
		if text := ev.GetContent(); text != "" {
			if sse.raw(enc.content(text)) != nil {
				return
			}
		}
		// The first piece of a call (with its id) opens it, with type
		// and name; the others carry only argument text.
		for _, d := range ev.GetToolCalls()[skip:] {
			if sse.raw(enc.toolCall(int(d.GetIndex()), d.GetId(), d.GetName(), d.GetArguments())) != nil {
				return
			}
		}
		skip = 0
		if f := ev.GetFinishReason(); f != inferencev1.FinishReason_FINISH_REASON_UNSPECIFIED {
			if sse.raw(enc.finish(finishReason(f))) != nil {
				return
			}
			if call.includeUsage {
				if sse.raw(enc.usage(toUsage(ev.GetUsage()))) != nil {
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
			fail(err)
			return
		}
	}
}

// isEmpty reports whether ev adds nothing to the reply and does not end it.
func isEmpty(ev *inferencev1.ChatCompletionResponse) bool {
	return ev.GetContent() == "" && ev.GetReasoning() == "" && len(ev.GetToolCalls()) == 0 &&
		ev.GetFinishReason() == inferencev1.FinishReason_FINISH_REASON_UNSPECIFIED
}

// streamError ends a stream that failed after its 200: the event is
// recorded, then one error event is written. A stream cut by the gateway's
// shutdown ends the same way, with 503 service_unavailable.
func (s *Server) streamError(r *http.Request, sse *sseWriter, rc *requestContext, err error) {
	var e *apiError
	switch {
	case shuttingDown(r):
		e = unavailable()
	case r.Context().Err() != nil:
		// The client went away (or half-closed): its event holds what
		// was written, and the stream is cut, not ended as if complete.
		_ = rc.call.Record(r.Context(), http.StatusOK, sse.sent.Bytes())
		abort()
	default:
		pe := pipeline.AsError(err)
		if !pe.Logged {
			s.log.Warn("stream failed after it started", "request_id", rc.id, "err", err)
		}
		e = fromPipeline(pe)
	}
	e.RequestID = rc.id
	payload := mustMarshal(e.envelope())
	sse.keep(payload)
	_ = rc.call.Record(r.Context(), http.StatusOK, sse.sent.Bytes())
	_ = sse.raw(payload)
}
