package edge

import (
	"context"
	"net/http"
	"strings"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/openai"
	"github.com/tollgate-dev/tollgate/server/pipeline"
)

// chatCompletions serves POST /v1/chat/completions, plain or streamed.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request, rc *requestContext) {
	if !s.readBody(w, r, rc) {
		return
	}
	call, aerr := decodeChat(rc.call.RequestBody, rc.id)
	if aerr != nil {
		s.respondError(w, r, rc, aerr)
		return
	}
	rc.call.Model = call.req.GetModel()
	// The engine call ends with the client's request: a disconnect cancels
	// it, and so does returning early for any other reason.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	reply, first, ok := s.startChat(ctx, w, r, rc, call.req, pipeline.ChatOptions{Stream: call.stream, OneToolCall: call.oneToolCall})
	if !ok {
		return
	}
	if call.stream {
		s.streamChat(w, r, rc, call, reply, first)
		return
	}
	s.plainChat(w, r, rc, call, reply, first)
}

// plainChat accumulates the reply's events into one chat.completion.
func (s *Server) plainChat(w http.ResponseWriter, r *http.Request, rc *requestContext, call *chatCall, reply *pipeline.Reply, ev *inferencev1.ChatCompletionResponse) {
	acc, ok := s.wholeReply(w, r, rc, reply, ev)
	if !ok {
		return
	}
	// content is null only for a reply that is tool calls alone; text the
	// engine wrote alongside its calls is sent with them, as a stream
	// relays it.
	msg := openai.ResponseMessage{Role: openai.RoleAssistant, ToolCalls: acc.calls, Reasoning: acc.reasoning.String()}
	if text := acc.content.String(); text != "" || len(acc.calls) == 0 {
		msg.Content = &text
	}
	body := openai.ChatCompletion{
		ID:      rc.id,
		Object:  openai.ObjectChatCompletion,
		Created: rc.call.Received().Unix(),
		Model:   call.req.GetModel(),
		Choices: []openai.Choice{{Index: 0, Message: msg, FinishReason: finishReason(acc.finish)}},
		Usage:   toUsage(acc.usage),
	}
	s.respondUsed(w, r, rc, pipeline.AddTokens(rc.call.PromptTokens, rc.call.CompletionTokens), body.AppendJSON(make([]byte, 0, replySizeHint(&msg))))
}

// replySizeHint is about the size of a plain reply's JSON with msg: its
// members and the message's strings, so that one allocation usually holds
// it.
func replySizeHint(msg *openai.ResponseMessage) int {
	n := 384 + len(msg.Reasoning)
	if msg.Content != nil {
		n += len(*msg.Content)
	}
	for _, c := range msg.ToolCalls {
		n += 96 + len(c.ID) + len(c.Function.Name) + len(c.Function.Arguments)
	}
	return n
}

// startChat runs a chat request (of the chat or the Responses API) through
// the pipeline's policy and limits, then starts the engine's reply
// (startReply). A refusal is answered here (ok false).
func (s *Server) startChat(ctx context.Context, w http.ResponseWriter, r *http.Request, rc *requestContext, req *inferencev1.ChatCompletionRequest,
	opts pipeline.ChatOptions) (*pipeline.Reply, *inferencev1.ChatCompletionResponse, bool) {
	exposed, err := rc.call.DecideChat(r.Context(), req, opts)
	if err != nil {
		s.refuse(w, r, rc, err)
		return nil, nil, false
	}
	if err := rc.call.ReserveChat(r.Context(), req); err != nil {
		s.refuse(w, r, rc, err)
		return nil, nil, false
	}
	return s.startReply(ctx, w, r, rc, req, exposed)
}

// startReply sets the admitted key's limit headers and starts the engine's
// reply, ended with ctx. The first event is read before committing to a
// 200, so that a refusal by the engine is an ordinary HTTP error,
// answered here (ok false).
func (s *Server) startReply(ctx context.Context, w http.ResponseWriter, r *http.Request, rc *requestContext, req *inferencev1.ChatCompletionRequest,
	filter *pipeline.ToolFilter) (*pipeline.Reply, *inferencev1.ChatCompletionResponse, bool) {
	s.limitHeaders(w, rc)
	reply, first, err := rc.call.Chat(ctx, req, filter)
	if err != nil {
		s.refuse(w, r, rc, err)
		return nil, nil, false
	}
	return reply, first, true
}

// wholeReply reads a reply to its finish event, ev first, for a plain
// (non-streamed) answer. A failure is answered here (ok false).
func (s *Server) wholeReply(w http.ResponseWriter, r *http.Request, rc *requestContext, reply *pipeline.Reply, ev *inferencev1.ChatCompletionResponse) (*accumulator, bool) {
	acc, err := readWhole(reply, ev)
	if err != nil {
		s.refuse(w, r, rc, err)
		return nil, false
	}
	return acc, true
}

// readWhole reads a reply to its finish event, ev first.
func readWhole(reply *pipeline.Reply, ev *inferencev1.ChatCompletionResponse) (*accumulator, error) {
	acc := &accumulator{}
	for {
		acc.add(ev)
		if reply.Done() {
			return acc, nil
		}
		var err error
		if ev, err = reply.Next(); err != nil {
			return nil, err
		}
	}
}

// accumulator merges reply events: content in order, tool calls by the
// client's index.
type accumulator struct {
	content   strings.Builder
	reasoning strings.Builder
	calls     []openai.ToolCall
	finish    inferencev1.FinishReason
	usage     *inferencev1.Usage
}

// add merges one event of a pipeline.Reply.
func (a *accumulator) add(ev *inferencev1.ChatCompletionResponse) {
	a.content.WriteString(ev.GetContent())
	a.reasoning.WriteString(ev.GetReasoning())
	for _, d := range ev.GetToolCalls() {
		i := int(d.GetIndex())
		for len(a.calls) <= i {
			a.calls = append(a.calls, openai.ToolCall{Type: openai.ToolTypeFunction})
		}
		c := &a.calls[i]
		if d.GetId() != "" {
			c.ID, c.Function.Name = d.GetId(), d.GetName()
		}
		c.Function.Arguments += d.GetArguments()
	}
	if ev.GetFinishReason() != inferencev1.FinishReason_FINISH_REASON_UNSPECIFIED {
		a.finish, a.usage = ev.GetFinishReason(), ev.GetUsage()
	}
}

func finishReason(f inferencev1.FinishReason) string {
	switch f {
	case inferencev1.FinishReason_FINISH_REASON_LENGTH:
		return openai.FinishLength
	case inferencev1.FinishReason_FINISH_REASON_TOOL_CALLS:
		return openai.FinishToolCalls
	case inferencev1.FinishReason_FINISH_REASON_CONTENT_FILTER:
		return openai.FinishContentFilter
	}
	return openai.FinishStop
}

func toUsage(u *inferencev1.Usage) openai.Usage {
	return openai.Usage{
		PromptTokens:     u.GetPromptTokens(),
		CompletionTokens: u.GetCompletionTokens(),
		TotalTokens:      pipeline.AddTokens(u.GetPromptTokens(), u.GetCompletionTokens()),
	}
}
