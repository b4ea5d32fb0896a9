package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

func weatherTool(name string) openai.ChatCompletionToolUnionParam {
	return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:       name,
		Parameters: shared.FunctionParameters{"type": "object"},
	})
}

// An out-of-scope tool is refused before the model sees anything, with a
// 403 of type policy that names the tool and carries the decision id.
func TestPolicyDeniesOutOfScopeTool(t *testing.T) {
	s := startStack(t)
	var resp *http.Response
	_, err := client(s.base, allKey).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "builtin/echo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(`/tool delete_database {}`)},
		Tools:    []openai.ChatCompletionToolUnionParam{weatherTool("get_weather"), weatherTool("delete_database")},
	}, option.WithResponseInto(&resp))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("want an API error, got %v", err)
	}
	var env struct {
		PolicyDecisionID string `json:"policy_decision_id"`
		RequestID        string `json:"request_id"`
	}
	_ = json.Unmarshal([]byte(apiErr.RawJSON()), &env)
	if apiErr.StatusCode != http.StatusForbidden || apiErr.Code != "policy_denied" || apiErr.Type != "policy" {
		t.Fatalf("got %d %s/%s", apiErr.StatusCode, apiErr.Code, apiErr.Type)
	}
	if !strings.HasPrefix(env.PolicyDecisionID, "dec_") || !strings.Contains(apiErr.Message, "delete_database") {
		t.Fatalf("envelope %s", apiErr.RawJSON())
	}
	// The denial is an audit event that carries the decision id.
	rec, err := s.audit.Event(env.RequestID)
	if err != nil {
		t.Fatalf("denied request has no audit event: %v", err)
	}
	if rec.Leaf.Status != 403 || rec.Leaf.PolicyDecisionID != env.PolicyDecisionID {
		t.Fatalf("audit leaf %+v", rec.Leaf)
	}
}

// An in-scope tool makes the full round trip, and every step is audited
// with its usage.
func TestPolicyAllowsInScopeToolAndAudits(t *testing.T) {
	s := startStack(t)
	ctx := context.Background()
	cl := client(s.base, allKey)
	tools := []openai.ChatCompletionToolUnionParam{weatherTool("get_weather")}
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage(`/tool get_weather {"city":"Oslo"}`)}
	first, err := cl.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "builtin/echo", Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	call := first.Choices[0].Message.ToolCalls[0]
	msgs = append(msgs, first.Choices[0].Message.ToParam(), openai.ToolMessage("sunny", call.ID))
	second, err := cl.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "builtin/echo", Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if second.Choices[0].Message.Content != "tool result: sunny" {
		t.Fatalf("second reply %q", second.Choices[0].Message.Content)
	}
	for _, c := range []*openai.ChatCompletion{first, second} {
		rec, err := s.audit.Event(c.ID)
		if err != nil {
			t.Fatalf("no audit event for %s: %v", c.ID, err)
		}
		if rec.Leaf.Status != 200 || rec.Leaf.PromptTokens != c.Usage.PromptTokens || rec.Leaf.CompletionTokens != c.Usage.CompletionTokens ||
			!strings.HasPrefix(rec.Leaf.PolicyDecisionID, "dec_") {
			t.Fatalf("audit leaf %+v for usage %+v", rec.Leaf, c.Usage)
		}
	}
}

// A stream's event is durable before [DONE] and holds the bytes sent: role
// chunk, three pieces, finish chunk, [DONE].
func TestStreamIsAuditedWithItsBytes(t *testing.T) {
	s := startStack(t)
	stream := client(s.base, allKey).Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:    "builtin/echo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("audit this stream")},
	})
	var id string
	for stream.Next() {
		id = stream.Current().ID
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	rec, err := s.audit.Event(id)
	if err != nil {
		t.Fatal(err)
	}
	body := string(rec.ResponseBody)
	if !strings.HasSuffix(body, "data: [DONE]\n\n") || strings.Count(body, "data: ") != 6 || rec.Leaf.CompletionTokens != 3 {
		t.Fatalf("recorded stream %q, leaf %+v", body, rec.Leaf)
	}
}
