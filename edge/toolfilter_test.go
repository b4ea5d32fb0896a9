package edge_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/policy"
)

// scriptedChat answers every ChatCompletion with evs instead of the
// built-in engine's reply, as an engine that emits exactly these events
// would; the other methods reach the built-in engine.
func scriptedChat(evs ...*inferencev1.ChatCompletionResponse) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if info.FullMethod != inferencev1.InferenceService_ChatCompletion_FullMethodName {
			return h(srv, ss)
		}
		if err := ss.RecvMsg(new(inferencev1.ChatCompletionRequest)); err != nil {
			return err
		}
		for _, ev := range evs {
			if err := ss.SendMsg(ev); err != nil {
				return err
			}
		}
		return nil
	}
}

// toolCallPieces is a scripted engine reply: the given tool-call pieces,
// one event each, then text and a tool_calls finish that a broken call
// must keep from the client.
func toolCallPieces(pieces ...*inferencev1.ToolCallDelta) grpc.StreamServerInterceptor {
	var evs []*inferencev1.ChatCompletionResponse
	for _, p := range pieces {
		evs = append(evs, &inferencev1.ChatCompletionResponse{ToolCalls: []*inferencev1.ToolCallDelta{p}})
	}
	evs = append(evs,
		&inferencev1.ChatCompletionResponse{Content: "after the call"},
		&inferencev1.ChatCompletionResponse{FinishReason: inferencev1.FinishReason_FINISH_REASON_TOOL_CALLS,
			Usage: &inferencev1.Usage{PromptTokens: 3, CompletionTokens: 2}})
	return scriptedChat(evs...)
}

// toolRequest asks builtin/echo with get_weather offered, plain or streamed.
func toolRequest(stream bool) string {
	return fmt.Sprintf(`{"model":"builtin/echo","stream":%t,`+weatherTool+
		`,"messages":[{"role":"user","content":"what is the weather"}]}`, stream)
}

// A call is checked by the name its first piece gives it. A later piece of
// the same call that names another tool, or gives the call another id, is a
// broken engine answer, handled as an engine that fails mid-reply: plain,
// 500 internal_error and nothing of the call; streamed, the pieces already
// sent, then the error event and no [DONE]. The changing piece never
// reaches the client, and the event is recorded with what the client got.
// The failed request is one warning, the one naming what the engine did,
// with the request's id: not that and then the generic "internal call
// failed" or "stream failed after it started" for the same failure.
func TestToolCallRenamedByLaterPiece(t *testing.T) {
	pol, err := policy.Load(context.Background(), "../examples/policy", policy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const internal = `data: {"error":{"code":"internal_error","message":"internal error; retry with backoff","type":"server_error","request_id":"%s"}}`
	const (
		renamed    = "WARN engine renamed a tool call; the reply fails"
		newID      = "WARN engine changed a tool call's id; the reply fails"
		incomplete = "WARN engine began a tool call without its id or name; the reply fails"
	)
	for _, tc := range []struct {
		name   string
		pieces []*inferencev1.ToolCallDelta
		warn   string
		// sent are the tool-call deltas streamed before the error event.
		sent []string
		// hidden must not reach the client, plain or streamed.
		hidden []string
	}{
		{
			name: "renamed",
			pieces: []*inferencev1.ToolCallDelta{
				{Index: 0, Id: "call_1", Name: "get_weather", Arguments: `{"city":`},
				{Index: 0, Name: "delete_repo", Arguments: `"prod"}`},
			},
			warn:   renamed,
			sent:   []string{`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":"}}]}`},
			hidden: []string{"delete_repo", "prod"},
		},
		{
			name: "first piece without its id",
			pieces: []*inferencev1.ToolCallDelta{
				{Index: 0, Name: "get_weather"},
				{Index: 0, Id: "call_9", Name: "delete_repo", Arguments: `{"repo":"prod"}`},
			},
			warn:   incomplete,
			hidden: []string{"get_weather", "delete_repo", "call_9", "prod"},
		},
		{
			name: "first piece without its name",
			pieces: []*inferencev1.ToolCallDelta{
				{Index: 0, Id: "call_1", Arguments: `{"city":`},
				{Index: 0, Name: "get_weather", Arguments: `"Oslo"}`},
			},
			warn:   incomplete,
			hidden: []string{"get_weather", "call_1", "Oslo"},
		},
		{
			name: "second call without its id",
			pieces: []*inferencev1.ToolCallDelta{
				{Index: 0, Id: "call_1", Name: "get_weather", Arguments: `{}`},
				{Index: 1, Name: "get_weather", Arguments: `{"city":"Oslo"}`},
			},
			warn:   incomplete,
			sent:   []string{`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]}`},
			hidden: []string{"Oslo"},
		},
		{
			name: "renamed, call not exposed",
			pieces: []*inferencev1.ToolCallDelta{
				{Index: 0, Id: "call_1", Name: "delete_repo"},
				{Index: 0, Name: "get_weather", Arguments: `{"city":"Oslo"}`},
			},
			warn:   renamed,
			hidden: []string{"delete_repo", "call_1", "get_weather", "Oslo"},
		},
		{
			name: "another id",
			pieces: []*inferencev1.ToolCallDelta{
				{Index: 0, Id: "call_1", Name: "get_weather", Arguments: `{"city":`},
				{Index: 0, Id: "call_2", Arguments: `"Oslo"}`},
			},
			warn:   newID,
			sent:   []string{`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":"}}]}`},
			hidden: []string{"call_2", "Oslo"},
		},
	} {
		for _, stream := range []bool{false, true} {
			mode := "plain"
			if stream {
				mode = "stream"
			}
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				audit := newAuditRecorder()
				s := newStack(t, stackConfig{policy: pol, audit: audit, interceptors: []grpc.StreamServerInterceptor{toolCallPieces(tc.pieces...)}})
				r := s.post(t, "/v1/chat/completions", keyTool, toolRequest(stream))
				status := http.StatusInternalServerError
				hidden := tc.hidden
				if stream {
					status = http.StatusOK
					wantStream(t, r)
					c := chunks{id: r.id()}
					var want []string
					for _, d := range withRole(tc.sent) {
						want = append(want, c.chunk(d, "null"))
					}
					wantFrames(t, sseFrames(t, r.body), append(want, fmt.Sprintf(internal, r.id())))
				} else {
					wantError(t, r, http.StatusInternalServerError, "internal_error", "server_error", "")
					// Nothing of the call: not even what its first piece had.
					hidden = append(slices.Clone(hidden), "get_weather", "call_1", "tool_calls")
				}
				var leaked []string
				for _, h := range append(hidden, "after the call", "[DONE]") {
					if bytes.Contains(r.body, []byte(h)) {
						leaked = append(leaked, h)
					}
				}
				if leaked != nil {
					t.Errorf("%q reached the client:\n%s", leaked, r.body)
				}
				ev := audit.next(t)
				if ev.Status != status || ev.RequestID != r.id() || !bytes.Equal(ev.ResponseBody, r.body) {
					t.Errorf("recorded status %d id %s body %q, want %d %s %q", ev.Status, ev.RequestID, ev.ResponseBody, status, r.id(), r.body)
				}
				// Every warning is logged before the reply's last byte.
				if logged, ids := s.logs.warnings(), s.logs.requestIDs(); !slices.Equal(logged, []string{tc.warn}) || ids[0] != r.id() {
					t.Errorf("logged %q for requests %q, want only %q for %s", logged, ids, tc.warn, r.id())
				}
			})
		}
	}
}

// A later piece that repeats its call's id and name is consistent, not a
// change: the reply goes through, and a stream opens the call once (an
// SDK joins the strings of a call's deltas, so a repeated id would reach
// it as call_1call_1).
func TestToolCallPieceRepeatsIDAndName(t *testing.T) {
	pol, err := policy.Load(context.Background(), "../examples/policy", policy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := newStack(t, stackConfig{policy: pol, interceptors: []grpc.StreamServerInterceptor{toolCallPieces(
		&inferencev1.ToolCallDelta{Index: 0, Id: "call_1", Name: "get_weather", Arguments: `{"city":`},
		&inferencev1.ToolCallDelta{Index: 0, Id: "call_1", Name: "get_weather", Arguments: `"Oslo"}`},
	)}})
	t.Run("plain", func(t *testing.T) {
		r := s.post(t, "/v1/chat/completions", keyTool, toolRequest(false))
		want := completion(r.id(), `{"role":"assistant","content":"after the call","refusal":null,"tool_calls":[{"id":"call_1",`+
			`"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]}`,
			"tool_calls", `{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}`)
		if body := string(wantOK(t, r)); body != want {
			t.Errorf("body\n got %s\nwant %s", body, want)
		}
	})
	t.Run("stream", func(t *testing.T) {
		r := s.post(t, "/v1/chat/completions", keyTool, toolRequest(true))
		wantStream(t, r)
		c := chunks{id: r.id()}
		wantFrames(t, sseFrames(t, r.body), []string{
			c.chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":"}}]}`, "null"),
			c.chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"Oslo\"}"}}]}`, "null"),
			c.chunk(`{"content":"after the call"}`, "null"),
			c.chunk(`{}`, `"tool_calls"`),
			"data: [DONE]",
		})
	})
}

// A call to a tool the request did not expose is dropped, and a reply
// whose calls were all dropped finishes "stop", not "tool_calls": an SDK
// that sees tool_calls looks for calls to run.
func TestDroppedToolCallsFinishStop(t *testing.T) {
	pol, err := policy.Load(context.Background(), "../examples/policy", policy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := newStack(t, stackConfig{policy: pol, interceptors: []grpc.StreamServerInterceptor{toolCallPieces(
		&inferencev1.ToolCallDelta{Index: 0, Id: "call_1", Name: "delete_repo", Arguments: `{"repo":"prod"}`},
	)}})
	t.Run("plain", func(t *testing.T) {
		r := s.post(t, "/v1/chat/completions", keyTool, toolRequest(false))
		want := completion(r.id(), `{"role":"assistant","content":"after the call","refusal":null}`,
			"stop", `{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}`)
		if body := string(wantOK(t, r)); body != want {
			t.Errorf("body\n got %s\nwant %s", body, want)
		}
	})
	t.Run("stream", func(t *testing.T) {
		r := s.post(t, "/v1/chat/completions", keyTool, toolRequest(true))
		wantStream(t, r)
		c := chunks{id: r.id()}
		wantFrames(t, sseFrames(t, r.body), []string{
			c.chunk(`{"role":"assistant","content":""}`, "null"),
			c.chunk(`{"content":"after the call"}`, "null"),
			c.chunk(`{}`, `"stop"`),
			"data: [DONE]",
		})
	})
}

// parallel_tool_calls false lets one call through, the first to a tool
// the request exposed, as OpenAI and vLLM answer it; true, or not sent,
// lets every call through.
func TestParallelToolCalls(t *testing.T) {
	pol, err := policy.Load(context.Background(), "../examples/policy", policy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := newStack(t, stackConfig{policy: pol, interceptors: []grpc.StreamServerInterceptor{toolCallPieces(
		&inferencev1.ToolCallDelta{Index: 0, Id: "call_0", Name: "delete_repo", Arguments: `{}`},
		&inferencev1.ToolCallDelta{Index: 1, Id: "call_1", Name: "get_weather", Arguments: `{"city":"Oslo"}`},
		&inferencev1.ToolCallDelta{Index: 2, Id: "call_2", Name: "get_weather", Arguments: `{"city":"Bergen"}`},
	)}})
	call := func(id, city string) string {
		return `{"id":"` + id + `","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"` + city + `\"}"}}`
	}
	usage := `{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}`
	for _, tc := range []struct {
		name, field string
		calls       string
	}{
		{"false", `"parallel_tool_calls":false,`, call("call_1", "Oslo")},
		{"true", `"parallel_tool_calls":true,`, call("call_1", "Oslo") + "," + call("call_2", "Bergen")},
		{"not sent", "", call("call_1", "Oslo") + "," + call("call_2", "Bergen")},
	} {
		t.Run(tc.name+"/plain", func(t *testing.T) {
			r := s.post(t, "/v1/chat/completions", keyTool, `{"model":"builtin/echo",`+tc.field+weatherTool+
				`,"messages":[{"role":"user","content":"what is the weather"}]}`)
			want := completion(r.id(), `{"role":"assistant","content":"after the call","refusal":null,"tool_calls":[`+tc.calls+`]}`,
				"tool_calls", usage)
			if body := string(wantOK(t, r)); body != want {
				t.Errorf("body\n got %s\nwant %s", body, want)
			}
		})
	}
	t.Run("false/stream", func(t *testing.T) {
		r := s.post(t, "/v1/chat/completions", keyTool, `{"model":"builtin/echo","stream":true,"parallel_tool_calls":false,`+weatherTool+
			`,"messages":[{"role":"user","content":"what is the weather"}]}`)
		wantStream(t, r)
		c := chunks{id: r.id()}
		wantFrames(t, sseFrames(t, r.body), []string{
			c.chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]}`, "null"),
			c.chunk(`{"content":"after the call"}`, "null"),
			c.chunk(`{}`, `"tool_calls"`),
			"data: [DONE]",
		})
	})
}

// An engine that fails mid-reply for any other reason is one warning too,
// the general one, with the request's id: the warning that a broken tool
// call no longer doubles is still there for the failures nothing else
// logs.
func TestEngineFailureLogsOnce(t *testing.T) {
	failing := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if info.FullMethod != inferencev1.InferenceService_ChatCompletion_FullMethodName {
			return h(srv, ss)
		}
		if err := ss.RecvMsg(new(inferencev1.ChatCompletionRequest)); err != nil {
			return err
		}
		if err := ss.SendMsg(&inferencev1.ChatCompletionResponse{Content: "half a reply"}); err != nil {
			return err
		}
		return status.Error(codes.Internal, "engine fell over")
	}
	s := newStack(t, stackConfig{interceptors: []grpc.StreamServerInterceptor{failing}})
	for _, tc := range []struct {
		name   string
		stream bool
		status int
		warn   string
	}{
		{"plain", false, http.StatusInternalServerError, "WARN internal call failed"},
		{"stream", true, http.StatusOK, "WARN stream failed after it started"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(s.logs.warnings())
			r := s.post(t, "/v1/chat/completions", keyAll,
				fmt.Sprintf(`{"model":"builtin/echo","stream":%t,"messages":[{"role":"user","content":"hi"}]}`, tc.stream))
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			logged, ids := s.logs.warnings()[before:], s.logs.requestIDs()[before:]
			if !slices.Equal(logged, []string{tc.warn}) || ids[0] != r.id() {
				t.Errorf("logged %q for requests %q, want only %q for %s", logged, ids, tc.warn, r.id())
			}
		})
	}
}

// withRole is the deltas of a stream with its role chunk first: merged
// into the first delta when that is a tool call, as OpenAI sends it.
func withRole(deltas []string) []string {
	if len(deltas) > 0 && strings.HasPrefix(deltas[0], `{"tool_calls":`) {
		return append([]string{`{"role":"assistant","content":null,` + deltas[0][1:]}, deltas[1:]...)
	}
	return append([]string{`{"role":"assistant","content":""}`}, deltas...)
}
