package edge

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"google.golang.org/grpc"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
)

type chatStream = grpc.ServerStreamingClient[inferencev1.ChatCompletionResponse]

// chatCompletions serves POST /v1/chat/completions, plain or streamed.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request, rc *requestContext) {
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, rc.id, aerr)
		return
	}
	call, aerr := decodeChat(body, rc.id)
	if aerr != nil {
		writeError(w, rc.id, aerr)
		return
	}
	if !rc.principal.AllowsModel(call.req.GetModel()) {
		writeError(w, rc.id, policyDenied("this key may not use model %q", call.req.GetModel()))
		return
	}

	// The engine call ends with the client's request: a disconnect cancels
	// it, and so does returning early for any other reason.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stream, err := s.cfg.Inference.ChatCompletion(ctx, call.req)
	if err != nil {
		s.fail(w, rc, "chat completion", err)
		return
	}
	// Read the first event before committing to a 200, so that a refusal
	// by the engine is an ordinary HTTP error.
	first, err := stream.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = errEmptyReply
		}
		s.fail(w, rc, "chat completion", err)
		return
	}
	if call.stream {
		s.streamChat(w, rc, call, stream, first)
		return
	}
	s.plainChat(w, rc, call, stream, first)
}

var errEmptyReply = errors.New("engine ended the reply without a finish event")

// plainChat accumulates the engine's events into one chat.completion.
func (s *Server) plainChat(w http.ResponseWriter, rc *requestContext, call *chatCall, stream chatStream, ev *inferencev1.ChatCompletionResponse) {
	var acc accumulator
	for {
		acc.add(ev)
		if acc.done() {
			break
		}
		var err error
		if ev, err = stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				err = errEmptyReply
			}
			s.fail(w, rc, "chat completion", err)
			return
		}
	}
	msg := responseMessage{Role: "assistant", ToolCalls: acc.calls}
	if len(acc.calls) == 0 {
		text := acc.content.String()
		msg.Content = &text
	}
	body, _ := json.Marshal(chatCompletion{
		ID:      rc.id,
		Object:  "chat.completion",
		Created: rc.received.Unix(),
		Model:   call.req.GetModel(),
		Choices: []chatChoice{{Index: 0, Message: msg, FinishReason: finishReason(acc.finish)}},
		Usage:   toUsage(acc.usage),
	})
	writeJSON(w, body)
}

// accumulator merges reply events: content in order, tool calls by index.
type accumulator struct {
	content strings.Builder
	calls   []wireToolCall
	finish  inferencev1.FinishReason
	usage   *inferencev1.Usage
}

func (a *accumulator) add(ev *inferencev1.ChatCompletionResponse) {
	a.content.WriteString(ev.GetContent())
	for _, d := range ev.GetToolCalls() {
		i := int(d.GetIndex())
		for len(a.calls) <= i {
			a.calls = append(a.calls, wireToolCall{Type: "function"})
		}
		c := &a.calls[i]
		if d.GetId() != "" {
			c.ID = d.GetId()
		}
		if d.GetName() != "" {
			c.Function.Name = d.GetName()
		}
		c.Function.Arguments += d.GetArguments()
	}
	if ev.GetFinishReason() != inferencev1.FinishReason_FINISH_REASON_UNSPECIFIED {
		a.finish, a.usage = ev.GetFinishReason(), ev.GetUsage()
	}
}

func (a *accumulator) done() bool {
	return a.finish != inferencev1.FinishReason_FINISH_REASON_UNSPECIFIED
}

func finishReason(f inferencev1.FinishReason) string {
	switch f {
	case inferencev1.FinishReason_FINISH_REASON_LENGTH:
		return "length"
	case inferencev1.FinishReason_FINISH_REASON_TOOL_CALLS:
		return "tool_calls"
	case inferencev1.FinishReason_FINISH_REASON_CONTENT_FILTER:
		return "content_filter"
	}
	return "stop"
}

func toUsage(u *inferencev1.Usage) usage {
	return usage{
		PromptTokens:     u.GetPromptTokens(),
		CompletionTokens: u.GetCompletionTokens(),
		TotalTokens:      u.GetPromptTokens() + u.GetCompletionTokens(),
	}
}
