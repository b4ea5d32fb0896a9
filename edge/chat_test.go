package edge_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
)

// completion is the exact body of a non-streamed builtin/echo reply;
// message is the raw JSON of choices[0].message.
func completion(id, message, finish, usage string) string {
	return `{"id":"` + id + `","object":"chat.completion","created":1767225600,"model":"builtin/echo",` +
		`"choices":[{"index":0,"message":` + message + `,"finish_reason":"` + finish + `","logprobs":null}],` +
		`"usage":` + usage + `}`
}

func TestChatCompletionBody(t *testing.T) {
	const user = `"messages":[{"role":"user","content":"hello big world"}]`
	cases := []struct {
		name    string
		body    string
		content string // raw JSON
		finish  string
		usage   string
	}{
		{"plain", `{"model":"builtin/echo",` + user + `}`,
			`"hello big world"`, "stop", `{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}`},
		{"stream false", `{"model":"builtin/echo","stream":false,` + user + `}`,
			`"hello big world"`, "stop", `{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}`},
		{"system counts toward prompt", `{"model":"builtin/echo","messages":[{"role":"system","content":"be brief"},{"role":"developer","content":"really"},{"role":"user","content":"hello big world"}]}`,
			`"hello big world"`, "stop", `{"prompt_tokens":6,"completion_tokens":3,"total_tokens":9}`},
		{"max_tokens", `{"model":"builtin/echo","max_tokens":2,` + user + `}`,
			`"hello big"`, "length", `{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}`},
		{"max_tokens that fits", `{"model":"builtin/echo","max_tokens":3,` + user + `}`,
			`"hello big world"`, "stop", `{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}`},
		{"smaller of max_tokens and max_completion_tokens", `{"model":"builtin/echo","max_tokens":2,"max_completion_tokens":1,` + user + `}`,
			`"hello"`, "length", `{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}`},
		{"accepted and ignored fields", `{"model":"builtin/echo","temperature":0,"top_p":1,"n":1,"seed":7,"stop":["x","y"],"user":"u1","logit_bias":{},"frequency_penalty":0,` + user + `}`,
			`"hello big world"`, "stop", `{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}`},
		{"logprobs false", `{"model":"builtin/echo","logprobs":false,"top_logprobs":null,` + user + `}`,
			`"hello big world"`, "stop", `{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}`},
		{"functions and function_call null", `{"model":"builtin/echo","functions":null,"function_call":null,"messages":[{"role":"assistant","content":"x","function_call":null},{"role":"user","content":"hello big world"}]}`,
			`"hello big world"`, "stop", `{"prompt_tokens":4,"completion_tokens":3,"total_tokens":7}`},
		{"logprobs null", `{"model":"builtin/echo","logprobs":null,` + user + `}`,
			`"hello big world"`, "stop", `{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}`},
		{"stop null", `{"model":"builtin/echo","stop":null,` + user + `}`,
			`"hello big world"`, "stop", `{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}`},
		{"stop an empty array", `{"model":"builtin/echo","stop":[],` + user + `}`,
			`"hello big world"`, "stop", `{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}`},
		{"stop as a string", `{"model":"builtin/echo","stop":"x",` + user + `}`,
			`"hello big world"`, "stop", `{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}`},
		{"empty reply", `{"model":"builtin/echo","messages":[{"role":"system","content":"no user"}]}`,
			`""`, "stop", `{"prompt_tokens":2,"completion_tokens":0,"total_tokens":2}`},
		{"tool not offered", `{"model":"builtin/echo","messages":[{"role":"user","content":"/tool get_weather {}"}]}`,
			`"tool get_weather is not available"`, "stop", `{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}`},
		{"tool_choice none", `{"model":"builtin/echo",` + weatherTool + `,"tool_choice":"none","messages":[{"role":"user","content":"/tool get_weather {}"}]}`,
			`"tool get_weather is not available"`, "stop", `{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}`},
	}
	eachTransport(t, stackConfig{}, func(t *testing.T, s *stack) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := s.post(t, "/v1/chat/completions", keyTool, tc.body)
				body := string(wantOK(t, r))
				want := completion(r.id(), `{"role":"assistant","content":`+tc.content+`,"refusal":null}`, tc.finish, tc.usage)
				if body != want {
					t.Errorf("body\n got %s\nwant %s", body, want)
				}
				wantCompletionShape(t, r, false)
			})
		}
	})
}

// wantCompletionShape checks a completion's key sets and fixed values,
// independently of the exact bytes.
func wantCompletionShape(t *testing.T, r response, toolCalls bool) map[string]any {
	t.Helper()
	m := decodeMap(t, r.body)
	wantKeys(t, "completion", m, "id", "object", "created", "model", "choices", "usage")
	if m["id"] != r.id() || m["object"] != "chat.completion" || m["model"] != "builtin/echo" || m["created"] != json.Number("1767225600") {
		t.Errorf("id/object/model/created = %v/%v/%v/%v", m["id"], m["object"], m["model"], m["created"])
	}
	choices, _ := m["choices"].([]any)
	if len(choices) != 1 {
		t.Fatalf("choices %v", m["choices"])
	}
	ch := choices[0].(map[string]any)
	wantKeys(t, "choice", ch, "index", "message", "finish_reason", "logprobs")
	if ch["index"] != json.Number("0") || ch["logprobs"] != nil {
		t.Errorf("index %v logprobs %v", ch["index"], ch["logprobs"])
	}
	msg := ch["message"].(map[string]any)
	if toolCalls {
		wantKeys(t, "message", msg, "role", "content", "refusal", "tool_calls")
		if msg["content"] != nil {
			t.Errorf("content %v with tool calls, want null", msg["content"])
		}
	} else {
		wantKeys(t, "message", msg, "role", "content", "refusal")
	}
	if msg["role"] != "assistant" || msg["refusal"] != nil {
		t.Errorf("role %v refusal %v", msg["role"], msg["refusal"])
	}
	u := m["usage"].(map[string]any)
	wantKeys(t, "usage", u, "prompt_tokens", "completion_tokens", "total_tokens")
	p, _ := u["prompt_tokens"].(json.Number).Int64()
	c, _ := u["completion_tokens"].(json.Number).Int64()
	if tot, _ := u["total_tokens"].(json.Number).Int64(); tot != p+c {
		t.Errorf("usage %v", u)
	}
	return m
}

func TestChatToolCall(t *testing.T) {
	const ask = `"messages":[{"role":"user","content":"/tool get_weather {\"city\":\"Oslo\"}"}]`
	choices := []string{``, `"tool_choice":"auto",`, `"tool_choice":"required",`, `"tool_choice":{"type":"function","function":{"name":"get_weather"}},`}
	eachTransport(t, stackConfig{}, func(t *testing.T, s *stack) {
		for _, choice := range choices {
			t.Run("choice "+choice, func(t *testing.T) {
				r := s.post(t, "/v1/chat/completions", keyTool, `{"model":"builtin/echo",`+choice+weatherTool+`,`+ask+`}`)
				body := string(wantOK(t, r))
				m := callIDRe.FindStringSubmatch(body)
				if m == nil {
					t.Fatalf("no call id in %s", body)
				}
				want := completion(r.id(), `{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"`+m[1]+
					`","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]}`,
					"tool_calls", `{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}`)
				if body != want {
					t.Errorf("body\n got %s\nwant %s", body, want)
				}
				wantCompletionShape(t, r, true)
			})
		}
	})
}

// textFirst makes every reply begin with a content event holding text, as
// an engine does that writes a few words before calling a tool.
func textFirst(text string) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return h(srv, &textFirstStream{ServerStream: ss, text: text})
	}
}

type textFirstStream struct {
	grpc.ServerStream
	text string
	sent bool
}

func (s *textFirstStream) SendMsg(m any) error {
	if !s.sent {
		s.sent = true
		if err := s.ServerStream.SendMsg(&inferencev1.ChatCompletionResponse{Content: s.text}); err != nil {
			return err
		}
	}
	return s.ServerStream.SendMsg(m)
}

// Text the engine writes alongside a tool call reaches the client with the
// call, plain as streamed; content is null only for a reply of calls alone.
func TestChatToolCallWithText(t *testing.T) {
	s := newStack(t, stackConfig{interceptors: []grpc.StreamServerInterceptor{textFirst("Let me check. ")}})
	const ask = `"messages":[{"role":"user","content":"/tool get_weather {\"city\":\"Oslo\"}"}]`
	r := s.post(t, "/v1/chat/completions", keyTool, `{"model":"builtin/echo",`+weatherTool+`,`+ask+`}`)
	body := string(wantOK(t, r))
	m := callIDRe.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no call id in %s", body)
	}
	want := completion(r.id(), `{"role":"assistant","content":"Let me check. ","refusal":null,"tool_calls":[{"id":"`+m[1]+
		`","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]}`,
		"tool_calls", `{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}`)
	if body != want {
		t.Errorf("body\n got %s\nwant %s", body, want)
	}

	r = s.post(t, "/v1/chat/completions", keyTool, `{"model":"builtin/echo","stream":true,`+weatherTool+`,`+ask+`}`)
	wantStream(t, r)
	frames := sseFrames(t, r.body)
	c := chunks{id: r.id()}
	if len(frames) < 2 || frames[1] != c.chunk(`{"content":"Let me check. "}`, "null") {
		t.Errorf("streamed reply does not relay the text first: %q", frames)
	}
}

func TestChatToolResult(t *testing.T) {
	eachTransport(t, stackConfig{}, func(t *testing.T, s *stack) {
		r := s.post(t, "/v1/chat/completions", keyTool, `{"model":"builtin/echo",`+weatherTool+`,"messages":[`+
			`{"role":"user","content":"/tool get_weather {\"city\":\"Oslo\"}"},`+
			`{"role":"assistant","content":null,"tool_calls":[{"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},`+
			`{"role":"tool","tool_call_id":"call_abc","content":"sunny, 21 C"}]}`)
		body := string(wantOK(t, r))
		want := completion(r.id(), `{"role":"assistant","content":"tool result: sunny, 21 C","refusal":null}`,
			"stop", `{"prompt_tokens":6,"completion_tokens":5,"total_tokens":11}`)
		if body != want {
			t.Errorf("body\n got %s\nwant %s", body, want)
		}
	})
}

// The body is JSON whatever Content-Type says, so `curl -d` works.
func TestContentTypeNotEnforced(t *testing.T) {
	s := newStack(t, stackConfig{})
	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded"} {
		req := s.newRequest(t, http.MethodPost, "/v1/chat/completions", keyAll, `{"model":"builtin/echo","messages":[{"role":"user","content":"hi"}]}`)
		req.Header.Set("Content-Type", ct)
		r := s.send(t, req)
		if body := string(wantOK(t, r)); !strings.Contains(body, `"content":"hi"`) {
			t.Errorf("Content-Type %q: %s", ct, body)
		}
	}
}

// Every response carries a fresh req_ id of 26 base32 characters (time
// then random, see internal/ids).
func TestRequestIDs(t *testing.T) {
	s := newStack(t, stackConfig{})
	seen := map[string]bool{}
	for _, r := range []response{
		s.post(t, "/v1/chat/completions", keyAll, `{"model":"builtin/echo","messages":[{"role":"user","content":"hi"}]}`),
		s.post(t, "/v1/chat/completions", keyAll, `{}`),
		s.do(t, http.MethodGet, "/v1/models", "", ""),
		s.do(t, http.MethodGet, "/nope", "", ""),
	} {
		id := r.id()
		if len(id) != 30 || !strings.HasPrefix(id, "req_") || strings.Trim(id[4:], "0123456789abcdefghjkmnpqrstvwxyz") != "" || seen[id] {
			t.Errorf("x-request-id %q", id)
		}
		seen[id] = true
	}
}
