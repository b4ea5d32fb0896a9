package sdk_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/internal/seed"
	"github.com/tollgate-dev/tollgate/server/keys"
)

// otherTenantKey is a key of a second tenant, seeded by responsesStack.
const otherTenantKey = "tgk_test_globex_all"

// responsesStack is the stack with a second tenant besides acme.
func responsesStack(t *testing.T) *stack {
	t.Helper()
	cli := etcdtest.Client(t)
	s, err := seed.Parse(strings.NewReader("tenants:\n  - id: globex\n    keys:\n      - label: all\n        secret: " +
		otherTenantKey + "\n        models: [\"*\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(context.Background(), keys.NewStore(cli, nil)); err != nil {
		t.Fatal(err)
	}
	return startStackOn(t, cli)
}

func wantAPIError(t *testing.T, err error, status int, code string) {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != status || apiErr.Code != code {
		t.Fatalf("want %d %s, got %v", status, code, err)
	}
}

func TestResponsesPlainAndStored(t *testing.T) {
	s := responsesStack(t)
	ctx := context.Background()
	cl := client(s.base, allKey)
	var httpResp *http.Response
	resp, err := cl.Responses.New(ctx, responses.ResponseNewParams{
		Model:        "builtin/echo",
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("hello from the SDK")},
		Instructions: openai.String("echo it"),
	}, option.WithResponseInto(&httpResp))
	if err != nil {
		t.Fatal(err)
	}
	if resp.OutputText() != "hello from the SDK" || resp.Status != responses.ResponseStatusCompleted || !strings.HasPrefix(resp.ID, "resp_") ||
		resp.Usage.InputTokens != 6 || resp.Usage.OutputTokens != 4 || resp.Usage.TotalTokens != 10 {
		t.Fatalf("response %+v", resp)
	}
	reqID := httpResp.Header.Get("x-request-id")
	if strings.TrimPrefix(reqID, "req_") != strings.TrimPrefix(resp.ID, "resp_") {
		t.Errorf("x-request-id %q, response id %q", reqID, resp.ID)
	}
	rec, err := s.audit.Event(reqID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Leaf.Endpoint != "/v1/responses" || rec.Leaf.Status != 200 || rec.Leaf.PromptTokens != 6 || !strings.HasPrefix(rec.Leaf.PolicyDecisionID, "dec_") {
		t.Errorf("audit leaf %+v", rec.Leaf)
	}
	// Its event is in the tenant's tree: the inclusion proof verifies
	// against a signed head.
	if _, err := s.audit.SignHeads(time.Now()); err != nil {
		t.Fatal(err)
	}
	p, err := s.audit.InclusionProof(rec.Leaf.TenantID, rec.Day, reqID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := head.VerifyInclusion(p.Head, p.Leaf, p.LeafIndex, p.Hashes); err != nil {
		t.Fatalf("inclusion proof: %v", err)
	}

	got, err := cl.Responses.Get(ctx, resp.ID, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != "hello from the SDK" {
		t.Fatalf("get: %v %v", got, err)
	}
	_, err = client(s.base, otherTenantKey).Responses.Get(ctx, resp.ID, responses.ResponseGetParams{})
	wantAPIError(t, err, http.StatusNotFound, "not_found")
	err = client(s.base, otherTenantKey).Responses.Delete(ctx, resp.ID)
	wantAPIError(t, err, http.StatusNotFound, "not_found")
	_, err = client(s.base, otherTenantKey).Responses.New(ctx, responses.ResponseNewParams{
		Model: "builtin/echo", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")},
		PreviousResponseID: openai.String(resp.ID),
	})
	wantAPIError(t, err, http.StatusNotFound, "not_found")
	if err := cl.Responses.Delete(ctx, resp.ID); err != nil {
		t.Fatal(err)
	}
	_, err = cl.Responses.Get(ctx, resp.ID, responses.ResponseGetParams{})
	wantAPIError(t, err, http.StatusNotFound, "not_found")
}

func TestResponsesStreamed(t *testing.T) {
	s := responsesStack(t)
	stream := client(s.base, allKey).Responses.NewStreaming(context.Background(), responses.ResponseNewParams{
		Model: "builtin/echo", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("stream me please")},
	})
	var text string
	var types []string
	var final responses.Response
	seq := int64(0)
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != seq {
			t.Errorf("event %s has sequence_number %d, want %d", ev.Type, ev.SequenceNumber, seq)
		}
		seq++
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			text += ev.Delta
		case "response.completed":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text != "stream me please" || final.OutputText() != text || final.Status != responses.ResponseStatusCompleted {
		t.Fatalf("text %q, final %+v", text, final)
	}
	if types[0] != "response.created" || types[1] != "response.in_progress" || types[len(types)-1] != "response.completed" {
		t.Errorf("events %v", types)
	}
	rec, err := s.audit.Event("req_" + strings.TrimPrefix(final.ID, "resp_"))
	if err != nil {
		t.Fatal(err)
	}
	if body := string(rec.ResponseBody); !strings.HasPrefix(body, "event: response.created\n") ||
		!strings.Contains(body, "event: response.completed\n") || rec.Leaf.CompletionTokens != 3 {
		t.Errorf("recorded stream %q, leaf %+v", body, rec.Leaf)
	}
}

// A function tool round trip through previous_response_id: the call is
// a function_call item, its output goes back as function_call_output.
func TestResponsesFunctionToolRoundTrip(t *testing.T) {
	s := responsesStack(t)
	ctx := context.Background()
	cl := client(s.base, allKey)
	tools := []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", map[string]any{"type": "object"}, false)}
	first, err := cl.Responses.New(ctx, responses.ResponseNewParams{
		Model: "builtin/echo", Tools: tools,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(`/tool get_weather {"city":"Oslo"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Output) != 1 || first.Output[0].Type != "function_call" {
		t.Fatalf("output %+v", first.Output)
	}
	call := first.Output[0].AsFunctionCall()
	if call.Name != "get_weather" || call.Arguments != `{"city":"Oslo"}` || call.CallID == "" {
		t.Fatalf("call %+v", call)
	}
	second, err := cl.Responses.New(ctx, responses.ResponseNewParams{
		Model: "builtin/echo", Tools: tools, PreviousResponseID: openai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			callOutput(call.CallID, "sunny"),
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if second.OutputText() != "tool result: sunny" || second.PreviousResponseID != first.ID {
		t.Fatalf("second %q (previous %q)", second.OutputText(), second.PreviousResponseID)
	}

	// The same conversation sent whole, without previous_response_id.
	third, err := cl.Responses.New(ctx, responses.ResponseNewParams{
		Model: "builtin/echo", Tools: tools,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage(`/tool get_weather {"city":"Oslo"}`, responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfFunctionCall(call.Arguments, call.CallID, call.Name),
			callOutput(call.CallID, "rainy"),
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if third.OutputText() != "tool result: rainy" {
		t.Fatalf("third %q", third.OutputText())
	}
}

// A Responses request is governed as chat: a tool outside the key's
// tool: scopes is denied by the policy (audited with its decision), and
// max_output_tokens is the TPD reservation.
func TestResponsesLimitedDeniedAudited(t *testing.T) {
	s := responsesStack(t)
	ctx := context.Background()
	var httpResp *http.Response
	_, err := client(s.base, allKey).Responses.New(ctx, responses.ResponseNewParams{
		Model: "builtin/echo",
		Tools: []responses.ToolUnionParam{responses.ToolParamOfFunction("delete_database", map[string]any{"type": "object"}, false)},
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(`/tool delete_database {}`)},
	}, option.WithResponseInto(&httpResp))
	wantAPIError(t, err, http.StatusForbidden, "policy_denied")
	var apiErr *openai.Error
	errors.As(err, &apiErr)
	rec, err := s.audit.Event(apiErr.Response.Header.Get("x-request-id"))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Leaf.Endpoint != "/v1/responses" || rec.Leaf.Status != 403 || !strings.HasPrefix(rec.Leaf.PolicyDecisionID, "dec_") {
		t.Errorf("denied leaf %+v", rec.Leaf)
	}

	// small-day has 64 tokens a day: a reservation of 100 output tokens
	// cannot be admitted, a small one can.
	const smallDayKey = "tgk_test_acme_small_day"
	_, err = client(s.base, smallDayKey).Responses.New(ctx, responses.ResponseNewParams{
		Model: "builtin/echo", MaxOutputTokens: openai.Int(100),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	})
	wantAPIError(t, err, http.StatusTooManyRequests, "rate_limited")
	ok, err := client(s.base, smallDayKey).Responses.New(ctx, responses.ResponseNewParams{
		Model: "builtin/echo", MaxOutputTokens: openai.Int(16),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	})
	if err != nil || ok.OutputText() != "hi" {
		t.Fatalf("small reservation: %v %v", ok, err)
	}
}

// callOutput is a function_call_output item answering callID.
func callOutput(callID, output string) responses.ResponseInputItemUnionParam {
	p := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	p.OfFunctionCallOutput.CallID = openai.String(callID)
	return p
}
