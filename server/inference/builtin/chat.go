package builtin

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/inference"
)

// maxDelay bounds the waits of /delay, per piece and in all, so that a
// request cannot hold a stream for long.
const maxDelay = 60 * time.Second

// ChatCompletion implements inference.Engine for builtin/echo.
func (e *Engine) ChatCompletion(ctx context.Context, req *inferencev1.ChatCompletionRequest, send func(*inferencev1.ChatCompletionResponse) error) error {
	switch req.GetModel() {
	case EchoModel:
	case EmbedModel:
		return inference.WrongKind(req.GetModel(), inferencev1.ModelKind_MODEL_KIND_CHAT)
	default:
		return inference.ModelNotLoaded(req.GetModel())
	}
	usage := &inferencev1.Usage{PromptTokens: promptTokens(req.GetMessages())}
	plan := planReply(req)
	switch req.GetResponseFormat().GetType() {
	case inferencev1.ResponseFormatType_RESPONSE_FORMAT_TYPE_JSON_SCHEMA:
		return status.Errorf(codes.InvalidArgument, "model %s cannot follow a JSON schema; response_format json_object is supported", EchoModel)
	case inferencev1.ResponseFormatType_RESPONSE_FORMAT_TYPE_JSON_OBJECT:
		plan.text = jsonObjectReply(plan.text)
	}

	// The reply's bound: max_tokens, never above the model's own limit.
	limit := int64(EchoMaxOutputTokens)
	if req.MaxTokens != nil {
		limit = min(limit, req.GetMaxTokens())
	}
	if plan.toolName != "" {
		// The call is the reply: the bound cuts its arguments as it cuts
		// text (a model stops mid-call), so the usage never passes it.
		finish := inferencev1.FinishReason_FINISH_REASON_TOOL_CALLS
		if 1+CountTokens(plan.toolArgs) > limit {
			plan.toolArgs, finish = cutTokens(plan.toolArgs, limit-1), inferencev1.FinishReason_FINISH_REASON_LENGTH
		}
		usage.CompletionTokens = 1 + CountTokens(plan.toolArgs)
		return sendToolCall(plan, finish, usage, send)
	}

	reply, finish := plan.text, inferencev1.FinishReason_FINISH_REASON_STOP
	if CountTokens(reply) > limit {
		reply, finish = cutTokens(reply, limit), inferencev1.FinishReason_FINISH_REASON_LENGTH
	}
	usage.CompletionTokens = CountTokens(reply)
	waited := time.Duration(0)
	for _, p := range pieces(reply) {
		if d := min(plan.delay, maxDelay-waited); d > 0 {
			if err := e.sleep(ctx, d); err != nil {
				return err
			}
			waited += d
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := send(&inferencev1.ChatCompletionResponse{Content: p}); err != nil {
			return err
		}
	}
	return send(&inferencev1.ChatCompletionResponse{FinishReason: finish, Usage: usage})
}

// CountTokens implements inference.Engine: the prompt tokens of messages as
// ChatCompletion reports them (tools are not part of echo's prompt). Echo
// has no context length.
func (e *Engine) CountTokens(_ context.Context, req *inferencev1.CountTokensRequest) (*inferencev1.CountTokensResponse, error) {
	switch model := req.GetModel(); model {
	case EchoModel:
		return &inferencev1.CountTokensResponse{PromptTokens: promptTokens(req.GetMessages())}, nil
	case EmbedModel:
		return nil, inference.WrongKind(model, inferencev1.ModelKind_MODEL_KIND_CHAT)
	}
	return nil, inference.ModelNotLoaded(req.GetModel())
}

// jsonObjectReply is echo's reply in JSON mode: the text it would have
// answered, as the one member "text" of a JSON object.
func jsonObjectReply(text string) string {
	b, _ := json.Marshal(struct {
		Text string `json:"text"`
	}{text})
	return string(b)
}

// reply is what the echo model decided to answer.
type reply struct {
	text     string
	delay    time.Duration
	toolName string // set: answer with one call to this tool
	toolArgs string
}

func planReply(req *inferencev1.ChatCompletionRequest) reply {
	msgs := req.GetMessages()
	if n := len(msgs); n > 0 && msgs[n-1].GetRole() == inferencev1.Role_ROLE_TOOL {
		return reply{text: "tool result: " + messageText(msgs[n-1])}
	}
	var last string
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].GetRole() == inferencev1.Role_ROLE_USER {
			last = messageText(msgs[i])
			break
		}
	}
	if rest, ok := command(last, "/tool"); ok {
		name, args := splitWord(rest)
		args = strings.TrimSpace(args)
		if args == "" {
			args = "{}"
		}
		if offersTool(req, name) {
			return reply{toolName: name, toolArgs: args}
		}
		return reply{text: "tool " + name + " is not available"}
	}
	if rest, ok := command(last, "/delay"); ok {
		ms, text := splitWord(rest)
		if n, err := strconv.Atoi(ms); err == nil && n >= 0 {
			d := maxDelay
			if n < int(maxDelay/time.Millisecond) { // compared before multiplying: no overflow
				d = time.Duration(n) * time.Millisecond
			}
			return reply{text: text, delay: d}
		}
	}
	return reply{text: last}
}

// command reports whether s starts with the word cmd, returning the rest
// after the whitespace that follows it.
func command(s, cmd string) (string, bool) {
	rest, ok := strings.CutPrefix(s, cmd)
	if r, _ := utf8.DecodeRuneInString(rest); !ok || (rest != "" && !unicode.IsSpace(r)) {
		return "", false
	}
	return strings.TrimLeftFunc(rest, unicode.IsSpace), true
}

// splitWord returns the first word of s and the text after the whitespace
// that follows it.
func splitWord(s string) (word, rest string) {
	i := strings.IndexFunc(s, unicode.IsSpace)
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimLeftFunc(s[i:], unicode.IsSpace)
}

// offersTool reports whether the request lets the model call function name:
// it must be among the tools, and tool_choice must not be none or name
// another function.
func offersTool(req *inferencev1.ChatCompletionRequest, name string) bool {
	switch req.GetToolChoice().GetMode() {
	case inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_NONE:
		return false
	case inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_FUNCTION:
		if req.GetToolChoice().GetFunctionName() != name {
			return false
		}
	}
	for _, t := range req.GetTools() {
		if t.GetName() == name {
			return true
		}
	}
	return false
}

// sendToolCall streams one call: id and name first, then the arguments in
// two fragments, then the finish event.
func sendToolCall(p reply, finish inferencev1.FinishReason, usage *inferencev1.Usage, send func(*inferencev1.ChatCompletionResponse) error) error {
	half := len(p.toolArgs) / 2
	for half > 0 && half < len(p.toolArgs) && !utf8Start(p.toolArgs[half]) {
		half--
	}
	events := []*inferencev1.ToolCallDelta{
		{Index: 0, Id: newCallID(), Name: p.toolName},
		{Index: 0, Arguments: p.toolArgs[:half]},
		{Index: 0, Arguments: p.toolArgs[half:]},
	}
	for _, d := range events {
		if err := send(&inferencev1.ChatCompletionResponse{ToolCalls: []*inferencev1.ToolCallDelta{d}}); err != nil {
			return err
		}
	}
	return send(&inferencev1.ChatCompletionResponse{FinishReason: finish, Usage: usage})
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// messageText is a message's string content, or its text parts joined by
// "\n"; empty for null content.
func messageText(m *inferencev1.Message) string {
	if t, ok := m.GetContent().(*inferencev1.Message_Text); ok {
		return t.Text
	}
	parts := m.GetParts().GetParts()
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0].GetText()
	}
	texts := make([]string, len(parts))
	for i, p := range parts {
		texts[i] = p.GetText()
	}
	return strings.Join(texts, "\n")
}

// promptTokens counts the tokens of the text of every message.
func promptTokens(msgs []*inferencev1.Message) int64 {
	var n int64
	for _, m := range msgs {
		if t, ok := m.GetContent().(*inferencev1.Message_Text); ok {
			n += CountTokens(t.Text)
			continue
		}
		for _, p := range m.GetParts().GetParts() {
			n += CountTokens(p.GetText())
		}
	}
	return n
}

// cutTokens keeps the first n tokens of s, dropping the whitespace after the
// last one kept. It scans s without allocating: s may be a message of
// megabytes whose reply keeps a few thousand tokens of it.
func cutTokens(s string, n int64) string {
	var count int64
	in := false
	for i, r := range s {
		switch {
		case unicode.IsSpace(r):
			in = false
		case !in:
			in = true
			if count++; count > n {
				return strings.TrimRightFunc(s[:i], unicode.IsSpace)
			}
		}
	}
	return s
}

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

func newCallID() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return "call_" + string(b[:])
}
