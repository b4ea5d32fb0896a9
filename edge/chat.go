package edge

import (
	"context"
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
	if !s.readBody(w, r, rc) {
		return
	}
	call, aerr := decodeChat(rc.body, rc.id)
	if aerr != nil {
		s.respondError(w, r, rc, aerr)
		return
	}
	rc.model = call.req.GetModel()
	exposed, ok := s.decideChat(w, r, rc, call)
	if !ok {
		return
	}
	reserve, err := s.chatReserve(r.Context(), rc, call)
	if err != nil {
		s.fail(w, r, rc, "count tokens", err)
		return
	}
	if !s.admit(w, r, rc, reserve) {
		return
	}

	// The engine call ends with the client's request: a disconnect cancels
	// it, and so does returning early for any other reason.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stream, err := s.cfg.Inference.ChatCompletion(ctx, call.req)
	if err != nil {
		s.fail(w, r, rc, "chat completion", err)
		return
	}
	// Read the first event before committing to a 200, so that a refusal
	// by the engine is an ordinary HTTP error.
	first, err := stream.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = errEmptyReply
		}
		s.fail(w, r, rc, "chat completion", err)
		return
	}
	if call.stream {
		s.streamChat(w, r, rc, call, exposed, stream, first)
		return
	}
	s.plainChat(w, r, rc, call, exposed, stream, first)
}

var errEmptyReply = errors.New("engine ended the reply without a finish event")

// chatReserve is the tokens a chat request reserves against its key's TPD:
// the engine's exact prompt count plus max_tokens. Without max_tokens it
// reserves DefaultCompletionReserve, or less when the model's context
// leaves less room, and sets that as the engine's max_tokens. The sum
// saturates: a max_tokens near the int64 limit must make a reservation no
// day can hold (429), not wrap to a negative one. Keys without a TPD limit
// skip the count.
func (s *Server) chatReserve(ctx context.Context, rc *requestContext, call *chatCall) (int64, error) {
	if s.cfg.Limits == nil || rc.principal.TPD <= 0 {
		return 0, nil
	}
	resp, err := s.cfg.Inference.CountTokens(ctx, &inferencev1.CountTokensRequest{
		Model: call.req.GetModel(), Messages: call.req.GetMessages(), Tools: call.req.GetTools(),
		ChatTemplateKwargsJson: call.req.GetChatTemplateKwargsJson(),
		ReasoningEffort:        call.req.ReasoningEffort,
	})
	if err != nil {
		return 0, err
	}
	prompt := max(resp.GetPromptTokens(), 0)
	if call.req.MaxTokens == nil {
		// The engine is held to what is reserved, so that a reply can
		// never be charged more than was admitted (docs/limits.md); and
		// to the room its model's context leaves, which a model server
		// would otherwise refuse to exceed.
		reserve := int64(DefaultCompletionReserve)
		if n := resp.GetContextLength(); n > 0 && n-prompt >= 1 {
			reserve = min(reserve, n-prompt)
		}
		call.req.MaxTokens = &reserve
	}
	return addTokens(prompt, call.req.GetMaxTokens()), nil
}

// plainChat accumulates the engine's events into one chat.completion.
func (s *Server) plainChat(w http.ResponseWriter, r *http.Request, rc *requestContext, call *chatCall, exposed toolFilter, stream chatStream, ev *inferencev1.ChatCompletionResponse) {
	acc := accumulator{exposed: exposed}
	for {
		if err := acc.add(ev); err != nil {
			s.fail(w, r, rc, "chat completion", err)
			return
		}
		if acc.done() {
			break
		}
		var err error
		if ev, err = stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				err = errEmptyReply
			}
			s.fail(w, r, rc, "chat completion", err)
			return
		}
	}
	// content is null only for a reply that is tool calls alone; text the
	// engine wrote alongside its calls is sent with them, as a stream
	// relays it.
	msg := responseMessage{Role: "assistant", ToolCalls: acc.calls, Reasoning: acc.reasoning.String()}
	if text := acc.content.String(); text != "" || len(acc.calls) == 0 {
		msg.Content = &text
	}
	rc.promptTokens, rc.completionTokens = acc.usage.GetPromptTokens(), acc.usage.GetCompletionTokens()
	s.respondUsed(w, r, rc, addTokens(rc.promptTokens, rc.completionTokens), mustMarshal(chatCompletion{
		ID:      rc.id,
		Object:  "chat.completion",
		Created: rc.received.Unix(),
		Model:   call.req.GetModel(),
		Choices: []chatChoice{{Index: 0, Message: msg, FinishReason: acc.finishReason()}},
		Usage:   toUsage(acc.usage),
	}))
}

// accumulator merges reply events: content in order, tool calls by index.
type accumulator struct {
	exposed   toolFilter
	content   strings.Builder
	reasoning strings.Builder
	calls     []wireToolCall
	finish    inferencev1.FinishReason
	usage     *inferencev1.Usage
}

// add merges one event; an error is a broken engine answer (a tool call
// changed by a later piece), which fails the reply.
func (a *accumulator) add(ev *inferencev1.ChatCompletionResponse) error {
	a.content.WriteString(ev.GetContent())
	a.reasoning.WriteString(ev.GetReasoning())
	for _, d := range ev.GetToolCalls() {
		i, id, name, err := a.exposed.pass(d)
		if err != nil {
			return err
		}
		if i < 0 {
			continue
		}
		for len(a.calls) <= i {
			a.calls = append(a.calls, wireToolCall{Type: "function"})
		}
		c := &a.calls[i]
		if id != "" {
			c.ID = id
		}
		c.Function.Name = name
		c.Function.Arguments += d.GetArguments()
	}
	if ev.GetFinishReason() != inferencev1.FinishReason_FINISH_REASON_UNSPECIFIED {
		a.finish, a.usage = ev.GetFinishReason(), ev.GetUsage()
	}
	return nil
}

func (a *accumulator) done() bool {
	return a.finish != inferencev1.FinishReason_FINISH_REASON_UNSPECIFIED
}

// finishReason is the reply's finish reason; tool_calls only when a call
// reached the client.
func (a *accumulator) finishReason() string {
	if a.finish == inferencev1.FinishReason_FINISH_REASON_TOOL_CALLS && len(a.calls) == 0 {
		return "stop"
	}
	return finishReason(a.finish)
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
		TotalTokens:      addTokens(u.GetPromptTokens(), u.GetCompletionTokens()),
	}
}
