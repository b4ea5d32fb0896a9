package edge

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
)

var nullJSON = json.RawMessage("null")

// streamChat relays the engine's events as chat.completion.chunk events:
// a first chunk with the assistant role, one chunk per content or tool-call
// piece, a finish chunk with an empty delta, the usage chunk when asked
// for, then [DONE]. An error after the 200 is one error event, then close.
func (s *Server) streamChat(w http.ResponseWriter, rc *requestContext, call *chatCall, stream chatStream, ev *inferencev1.ChatCompletionResponse) {
	sse := newSSEWriter(w)
	c := chatChunk{ID: rc.id, Object: "chat.completion.chunk", Created: rc.received.Unix(), Model: call.req.GetModel()}
	if call.includeUsage {
		c.Usage = nullJSON
	}
	emit := func(d delta, finish *string) error {
		c.Choices = []chunkChoice{{Index: 0, Delta: d, FinishReason: finish}}
		return sse.event(&c)
	}
	empty := ""
	if emit(delta{Role: "assistant", Content: &empty}, nil) != nil {
		return
	}
	for {
		if text := ev.GetContent(); text != "" {
			if emit(delta{Content: &text}, nil) != nil {
				return
			}
		}
		for _, d := range ev.GetToolCalls() {
			td := toolCallDelta{Index: int(d.GetIndex()), Function: functionDelta{Arguments: d.GetArguments()}}
			if d.GetId() != "" {
				td.ID, td.Type, td.Function.Name = d.GetId(), "function", d.GetName()
			}
			if emit(delta{ToolCalls: []toolCallDelta{td}}, nil) != nil {
				return
			}
		}
		if f := ev.GetFinishReason(); f != inferencev1.FinishReason_FINISH_REASON_UNSPECIFIED {
			reason := finishReason(f)
			if emit(delta{}, &reason) != nil {
				return
			}
			if call.includeUsage {
				u, _ := json.Marshal(toUsage(ev.GetUsage()))
				c.Choices, c.Usage = []chunkChoice{}, u
				if sse.event(&c) != nil {
					return
				}
			}
			_ = sse.done()
			return
		}
		var err error
		if ev, err = stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				err = errEmptyReply
			}
			s.streamError(sse, rc, err)
			return
		}
	}
}

// streamError ends a stream that failed after its 200 with one error event.
func (s *Server) streamError(sse *sseWriter, rc *requestContext, err error) {
	e, ok := fromRPC(err)
	if !ok {
		return // the client went away
	}
	s.log.Warn("stream failed after it started", "request_id", rc.id, "err", err)
	e.RequestID = rc.id
	_ = sse.event(errorEnvelope{Error: e})
}
