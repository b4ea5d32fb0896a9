package edge_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/webtest"
)

const (
	chatPath  = "/v1/chat/completions"
	embedPath = "/v1/embeddings"
	hi        = `"messages":[{"role":"user","content":"hi"}]`
)

func TestBadRequest(t *testing.T) {
	cases := []struct {
		name, path, body, param string // param "": none
	}{
		// The body as a whole.
		{"malformed JSON", chatPath, `{"model":"builtin/echo",`, ""},
		{"trailing garbage", chatPath, `{"model":"builtin/echo",` + hi + `} x`, ""},
		{"empty body", chatPath, ``, ""},
		{"blank body", chatPath, " \n\t", ""},
		{"JSON array", chatPath, `[{"model":"builtin/echo"}]`, ""},
		{"JSON string", chatPath, `"hello"`, ""},
		{"null body", chatPath, `null`, "model"},
		// model
		{"missing model", chatPath, `{` + hi + `}`, "model"},
		{"empty model", chatPath, `{"model":"",` + hi + `}`, "model"},
		{"model without namespace", chatPath, `{"model":"echo",` + hi + `}`, "model"},
		{"model with empty name", chatPath, `{"model":"builtin/",` + hi + `}`, "model"},
		{"model of wrong type", chatPath, `{"model":5,` + hi + `}`, "model"},
		// messages
		{"missing messages", chatPath, `{"model":"builtin/echo"}`, "messages"},
		{"null messages", chatPath, `{"model":"builtin/echo","messages":null}`, "messages"},
		{"empty messages", chatPath, `{"model":"builtin/echo","messages":[]}`, "messages"},
		{"messages a string", chatPath, `{"model":"builtin/echo","messages":"hi"}`, "messages"},
		{"message a number", chatPath, `{"model":"builtin/echo","messages":[1]}`, "messages[0]"},
		{"missing role", chatPath, `{"model":"builtin/echo","messages":[{"content":"hi"}]}`, "messages[0].role"},
		{"unknown role", chatPath, `{"model":"builtin/echo","messages":[{"role":"wizard","content":"hi"}]}`, "messages[0].role"},
		{"role of wrong type", chatPath, `{"model":"builtin/echo","messages":[{"role":"user","content":"a"},{"role":5,"content":"hi"}]}`, "messages[1].role"},
		{"content a number", chatPath, `{"model":"builtin/echo","messages":[{"role":"user","content":5}]}`, "messages[0].content"},
		{"null content for user", chatPath, `{"model":"builtin/echo","messages":[{"role":"user","content":null}]}`, "messages[0].content"},
		{"image_url part", chatPath, `{"model":"builtin/echo","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"http://x/y.png"}}]}]}`, "messages[0].content[1].type"},
		{"text part without text", chatPath, `{"model":"builtin/echo","messages":[{"role":"user","content":[{"type":"text"}]}]}`, "messages[0].content[0].text"},
		{"text part of wrong type", chatPath, `{"model":"builtin/echo","messages":[{"role":"user","content":[{"type":"text","text":5}]}]}`, "messages[0].content[0].text"},
		{"tool message without tool_call_id", chatPath, `{"model":"builtin/echo","messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id"},
		{"tool_calls on a user message", chatPath, `{"model":"builtin/echo","messages":[{"role":"user","content":"x","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "messages[0].tool_calls"},
		{"tool call name of wrong type", chatPath, `{"model":"builtin/echo","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":true}}]}]}`, "messages[0].tool_calls[0].function.name"},
		// sampling
		{"temperature a string", chatPath, `{"model":"builtin/echo","temperature":"hot",` + hi + `}`, "temperature"},
		{"temperature 3", chatPath, `{"model":"builtin/echo","temperature":3,` + hi + `}`, "temperature"},
		{"temperature negative", chatPath, `{"model":"builtin/echo","temperature":-0.5,` + hi + `}`, "temperature"},
		{"top_p 2", chatPath, `{"model":"builtin/echo","top_p":2,` + hi + `}`, "top_p"},
		{"stream a string", chatPath, `{"model":"builtin/echo","stream":"yes",` + hi + `}`, "stream"},
		{"max_tokens a string", chatPath, `{"model":"builtin/echo","max_tokens":"many",` + hi + `}`, "max_tokens"},
		{"max_tokens fractional", chatPath, `{"model":"builtin/echo","max_tokens":1.5,` + hi + `}`, "max_tokens"},
		{"max_tokens 0", chatPath, `{"model":"builtin/echo","max_tokens":0,` + hi + `}`, "max_tokens"},
		{"max_completion_tokens 0", chatPath, `{"model":"builtin/echo","max_completion_tokens":0,` + hi + `}`, "max_completion_tokens"},
		{"n 2", chatPath, `{"model":"builtin/echo","n":2,` + hi + `}`, "n"},
		{"logprobs true", chatPath, `{"model":"builtin/echo","logprobs":true,` + hi + `}`, "logprobs"},
		{"logprobs a string", chatPath, `{"model":"builtin/echo","logprobs":"yes",` + hi + `}`, "logprobs"},
		{"top_logprobs", chatPath, `{"model":"builtin/echo","logprobs":true,"top_logprobs":2,` + hi + `}`, "logprobs"},
		{"top_logprobs without logprobs", chatPath, `{"model":"builtin/echo","top_logprobs":2,` + hi + `}`, "top_logprobs"},
		{"top_logprobs 0", chatPath, `{"model":"builtin/echo","logprobs":false,"top_logprobs":0,` + hi + `}`, "top_logprobs"},
		{"top_logprobs a string", chatPath, `{"model":"builtin/echo","top_logprobs":"2",` + hi + `}`, "top_logprobs"},
		{"stop a number", chatPath, `{"model":"builtin/echo","stop":5,` + hi + `}`, "stop"},
		{"five stops", chatPath, `{"model":"builtin/echo","stop":["a","b","c","d","e"],` + hi + `}`, "stop"},
		{"null stop", chatPath, `{"model":"builtin/echo","stop":["a",null],` + hi + `}`, "stop"},
		{"only a null stop", chatPath, `{"model":"builtin/echo","stop":[null],` + hi + `}`, "stop"},
		{"empty stop string", chatPath, `{"model":"builtin/echo","stop":"",` + hi + `}`, "stop"},
		{"empty stop in the array", chatPath, `{"model":"builtin/echo","stop":["a",""],` + hi + `}`, "stop"},
		{"stop a number in the array", chatPath, `{"model":"builtin/echo","stop":["a",1],` + hi + `}`, "stop"},
		{"stream_options without stream", chatPath, `{"model":"builtin/echo","stream_options":{"include_usage":true},` + hi + `}`, "stream_options"},
		{"stream_options with stream false", chatPath, `{"model":"builtin/echo","stream":false,"stream_options":{"include_usage":true},` + hi + `}`, "stream_options"},
		// tools
		{"tool with a bad name", chatPath, `{"model":"builtin/echo","tools":[{"type":"function","function":{"name":"get weather"}}],` + hi + `}`, "tools[0].function.name"},
		{"tool name of wrong type", chatPath, `{"model":"builtin/echo","tools":[{"type":"function","function":{"name":7}}],` + hi + `}`, "tools[0].function.name"},
		{"tool not a function", chatPath, `{"model":"builtin/echo","tools":[{"type":"retrieval","function":{"name":"f"}}],` + hi + `}`, "tools[0].type"},
		{"tool offered twice", chatPath, `{"model":"builtin/echo","tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}],` + hi + `}`, "tools[1].function.name"},
		{"tool parameters not an object", chatPath, `{"model":"builtin/echo","tools":[{"type":"function","function":{"name":"f","parameters":"x"}}],` + hi + `}`, "tools[0].function.parameters"},
		{"tool_choice names a tool not offered", chatPath, `{"model":"builtin/echo",` + weatherTool + `,"tool_choice":{"type":"function","function":{"name":"send_mail"}},` + hi + `}`, "tool_choice"},
		{"functions", chatPath, `{"model":"builtin/echo","functions":[{"name":"get_weather","parameters":{"type":"object"}}],` + hi + `}`, "functions"},
		{"functions empty", chatPath, `{"model":"builtin/echo","functions":[],` + hi + `}`, "functions"},
		{"functions with function_call", chatPath, `{"model":"builtin/echo","functions":[{"name":"f"}],"function_call":"auto",` + hi + `}`, "functions"},
		{"function_call", chatPath, `{"model":"builtin/echo",` + weatherTool + `,"function_call":{"name":"get_weather"},` + hi + `}`, "function_call"},
		{"function_call none", chatPath, `{"model":"builtin/echo","function_call":"none",` + hi + `}`, "function_call"},
		{"assistant message with function_call", chatPath, `{"model":"builtin/echo","messages":[{"role":"user","content":"hi"},` +
			`{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}},{"role":"user","content":"and?"}]}`, "messages[1].function_call"},
		{"tool_choice required without tools", chatPath, `{"model":"builtin/echo","tool_choice":"required",` + hi + `}`, "tool_choice"},
		{"tool_choice required with empty tools", chatPath, `{"model":"builtin/echo","tools":[],"tool_choice":"required",` + hi + `}`, "tool_choice"},
		{"tool_choice bad string", chatPath, `{"model":"builtin/echo",` + weatherTool + `,"tool_choice":"always",` + hi + `}`, "tool_choice"},
		{"tool_choice malformed object", chatPath, `{"model":"builtin/echo",` + weatherTool + `,"tool_choice":{"type":"function"},` + hi + `}`, "tool_choice"},
		{"tool_choice a number", chatPath, `{"model":"builtin/echo",` + weatherTool + `,"tool_choice":1,` + hi + `}`, "tool_choice"},
		// refused by the engine
		{"chat on the embeddings model", chatPath, `{"model":"builtin/embed",` + hi + `}`, ""},
		{"streamed chat on the embeddings model", chatPath, `{"model":"builtin/embed","stream":true,` + hi + `}`, ""},

		// embeddings
		{"embeddings: malformed JSON", embedPath, `{"model":`, ""},
		{"embeddings: missing model", embedPath, `{"input":"x"}`, "model"},
		{"embeddings: model without namespace", embedPath, `{"model":"embed","input":"x"}`, "model"},
		{"embeddings: missing input", embedPath, `{"model":"builtin/embed"}`, "input"},
		{"embeddings: empty input", embedPath, `{"model":"builtin/embed","input":""}`, "input"},
		{"embeddings: empty array", embedPath, `{"model":"builtin/embed","input":[]}`, "input"},
		{"embeddings: empty string in array", embedPath, `{"model":"builtin/embed","input":["a",""]}`, "input[1]"},
		{"embeddings: empty token array", embedPath, `{"model":"builtin/embed","input":[[1],[]]}`, "input[1]"},
		{"embeddings: null token", embedPath, `{"model":"builtin/embed","input":[1,null]}`, "input"},
		{"embeddings: mixed array", embedPath, `{"model":"builtin/embed","input":["a",1]}`, "input"},
		{"embeddings: 2049 strings", embedPath, `{"model":"builtin/embed","input":[` + repeatList(`"a"`, 2049) + `]}`, "input"},
		{"embeddings: 2049 token ids", embedPath, `{"model":"builtin/embed","input":[` + repeatList("1", 2049) + `]}`, "input"},
		{"embeddings: 2049 token-id arrays", embedPath, `{"model":"builtin/embed","input":[` + repeatList("[1]", 2049) + `]}`, "input"},
		{"embeddings: a token-id array of 2049", embedPath, `{"model":"builtin/embed","input":[[1],[` + repeatList("1", 2049) + `]]}`, "input[1]"},
		{"embeddings: input a number", embedPath, `{"model":"builtin/embed","input":5}`, "input"},
		{"embeddings: input an object", embedPath, `{"model":"builtin/embed","input":{"text":"a"}}`, "input"},
		{"embeddings: encoding_format int8", embedPath, `{"model":"builtin/embed","input":"x","encoding_format":"int8"}`, "encoding_format"},
		{"embeddings: dimensions 0", embedPath, `{"model":"builtin/embed","input":"x","dimensions":0}`, "dimensions"},
		{"embeddings: dimensions negative", embedPath, `{"model":"builtin/embed","input":"x","dimensions":-1}`, "dimensions"},
		{"embeddings: dimensions a string", embedPath, `{"model":"builtin/embed","input":"x","dimensions":"8"}`, "dimensions"},
		{"embeddings: dimensions 257 (engine)", embedPath, `{"model":"builtin/embed","input":"x","dimensions":257}`, ""},
		{"embeddings on the chat model (engine)", embedPath, `{"model":"builtin/echo","input":"x"}`, ""},
	}
	eachTransport(t, stackConfig{}, func(t *testing.T, s *stack) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := s.post(t, tc.path, keyAll, tc.body)
				wantError(t, r, http.StatusBadRequest, "invalid_request", "invalid_request_error", tc.param)
			})
		}
	})
}

// routes are the authenticated routes, each with a request that succeeds
// with keyAll.
var routes = []struct{ method, path, body string }{
	{http.MethodPost, chatPath, `{"model":"builtin/echo",` + hi + `}`},
	{http.MethodPost, chatPath, `{"model":"builtin/echo","stream":true,` + hi + `}`},
	{http.MethodPost, embedPath, `{"model":"builtin/embed","input":"x"}`},
	{http.MethodGet, "/v1/models", ""},
	{http.MethodGet, "/v1/models/builtin/echo", ""},
	{http.MethodGet, "/v1/models/builtin%2Fecho", ""},
}

func TestUnauthorized(t *testing.T) {
	s := newStack(t, stackConfig{})
	var message any
	for _, rt := range routes {
		for _, auth := range []string{
			"",
			"Basic " + keyAll,
			"Token " + keyAll,
			keyAll,
			"Bearer",
			"Bearer ",
			"Bearer tgk_unknown",
			"Bearer " + keyAll + "x",
		} {
			t.Run(rt.method+" "+rt.path+" "+auth, func(t *testing.T) {
				req := s.newRequest(t, rt.method, rt.path, "", rt.body)
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				e := wantError(t, s.send(t, req), http.StatusUnauthorized, "unauthorized", "authentication_error", "")
				if message == nil {
					message = e["message"]
				} else if e["message"] != message {
					t.Errorf("401 messages differ: %v and %v", e["message"], message)
				}
			})
		}
	}
	// Two Authorization headers are refused whichever comes first: which
	// key the request would be charged to is not the edge's to guess.
	for _, rt := range routes {
		for _, pair := range [][2]string{{keyAll, "tgk_unknown"}, {"tgk_unknown", keyAll}, {keyAll, keyAll}} {
			req := s.newRequest(t, rt.method, rt.path, "", rt.body)
			req.Header.Add("Authorization", "Bearer "+pair[0])
			req.Header.Add("Authorization", "Bearer "+pair[1])
			wantError(t, s.send(t, req), http.StatusUnauthorized, "unauthorized", "authentication_error", "")
		}
	}
	// The scheme is case-insensitive, and every route works with a good key.
	for _, rt := range routes {
		req := s.newRequest(t, rt.method, rt.path, "", rt.body)
		req.Header.Set("Authorization", "bearer "+keyAll)
		if r := s.send(t, req); r.status != http.StatusOK {
			t.Errorf("%s %s with a good key: %d %s", rt.method, rt.path, r.status, r.body)
		}
	}
}

func TestForbiddenModel(t *testing.T) {
	s := newStack(t, stackConfig{})
	for _, tc := range []struct{ name, key, path, body string }{
		{"chat", keyEmbed, chatPath, `{"model":"builtin/echo",` + hi + `}`},
		{"streamed chat", keyEmbed, chatPath, `{"model":"builtin/echo","stream":true,` + hi + `}`},
		{"chat, model not loaded either", keyEcho, chatPath, `{"model":"vllm/x",` + hi + `}`},
		{"embeddings", keyEcho, embedPath, `{"model":"builtin/embed","input":"x"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := wantError(t, s.post(t, tc.path, tc.key, tc.body), http.StatusForbidden, "policy_denied", "policy", "")
			if _, ok := e["policy_decision_id"]; ok {
				t.Errorf("policy_decision_id without a policy engine: %v", e)
			}
		})
	}
}

// Without a policy engine the key's tool: scopes still hold
// (policy.ScopesOnly): a tool the key does not cover is denied before the
// model sees it; a key that covers it is served. (A tool_choice can only
// name an offered tool, so the offered tools' check covers it.)
func TestForbiddenToolWithoutPolicy(t *testing.T) {
	s := newStack(t, stackConfig{})
	other := `"tools":[{"type":"function","function":{"name":"delete_files","parameters":{"type":"object"}}}]`
	for _, tc := range []struct{ name, key, body, want string }{
		{"offered, key has no tool scope", keyAll, `{"model":"builtin/echo",` + weatherTool + `,` + hi + `}`, `tool "get_weather" is not covered`},
		{"streamed", keyAll, `{"model":"builtin/echo","stream":true,` + weatherTool + `,` + hi + `}`, `tool "get_weather" is not covered`},
		{"offered, key covers another tool", keyTool, `{"model":"builtin/echo",` + other + `,` + hi + `}`, `tool "delete_files" is not covered`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := wantError(t, s.post(t, chatPath, tc.key, tc.body), http.StatusForbidden, "policy_denied", "policy", "")
			if msg, _ := e["message"].(string); !strings.Contains(msg, tc.want) {
				t.Errorf("message %q, want it to contain %q", msg, tc.want)
			}
		})
	}
	if r := s.post(t, chatPath, keyTool, `{"model":"builtin/echo",`+weatherTool+`,`+hi+`}`); r.status != http.StatusOK {
		t.Fatalf("a covered tool: %d %s", r.status, r.body)
	}
}

// With a policy engine, a model the key does not allow is denied by the
// policy's scope stage: the answer carries its decision id, and the audit
// event the same one.
func TestForbiddenModelWithPolicy(t *testing.T) {
	audit := newAuditRecorder()
	s := newStack(t, stackConfig{audit: audit, policy: loadBundle(t, `package tollgate.gateway

decision := {"allow": true, "reason": "allowed"}
`)})
	for _, tc := range []struct{ name, key, path, body string }{
		{"chat", keyEmbed, chatPath, `{"model":"builtin/echo",` + hi + `}`},
		{"embeddings", keyEcho, embedPath, `{"model":"builtin/embed","input":"x"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := wantError(t, s.post(t, tc.path, tc.key, tc.body), http.StatusForbidden, "policy_denied", "policy", "")
			id, _ := e["policy_decision_id"].(string)
			if !strings.HasPrefix(id, "dec_") {
				t.Fatalf("policy_decision_id %q", id)
			}
			if ev := audit.next(t); ev.PolicyDecisionID != id {
				t.Errorf("the audit event's decision %q, the answer's %q", ev.PolicyDecisionID, id)
			}
		})
	}
}

// A chat request's reasoning_effort reaches the policy as
// input.request.reasoning_effort (absent when not sent): a bundle that
// refuses xhigh denies such a request with 403 policy_denied and its
// decision id, and serves the same request with a lower effort or none.
func TestReasoningEffortAsksThePolicy(t *testing.T) {
	audit := newAuditRecorder()
	s := newStack(t, stackConfig{audit: audit, policy: loadBundle(t, `package tollgate.gateway

effort := object.get(input.request, "reasoning_effort", "unset")

decision := {"allow": false, "reason": sprintf("reasoning_effort %s is not allowed", [effort])} if {
	effort in {"xhigh", "max"}
} else := {"allow": true, "reason": sprintf("effort %s", [effort])}
`)})
	for _, tc := range []struct {
		name, effort string
		denied       string // the denial's message; "" when served
	}{
		{"xhigh", `,"reasoning_effort":"xhigh"`, "reasoning_effort xhigh is not allowed"},
		{"xhigh, streamed", `,"reasoning_effort":"xhigh","stream":true`, "reasoning_effort xhigh is not allowed"},
		{"max", `,"reasoning_effort":"max"`, "reasoning_effort max is not allowed"},
		{"low", `,"reasoning_effort":"low"`, ""},
		{"low, streamed", `,"reasoning_effort":"low","stream":true`, ""},
		{"none sent", ``, ""},
		{"null", `,"reasoning_effort":null`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.post(t, chatPath, keyAll, `{"model":"builtin/echo",`+hi+tc.effort+`}`)
			ev := audit.next(t)
			if !strings.HasPrefix(ev.PolicyDecisionID, "dec_") {
				t.Errorf("recorded decision %q", ev.PolicyDecisionID)
			}
			if tc.denied == "" {
				if r.status != http.StatusOK {
					t.Fatalf("status %d: %s", r.status, r.body)
				}
				return
			}
			e := wantError(t, r, http.StatusForbidden, "policy_denied", "policy", "")
			if id, _ := e["policy_decision_id"].(string); !strings.HasPrefix(id, "dec_") || id != ev.PolicyDecisionID {
				t.Errorf("policy_decision_id %q, recorded %q", id, ev.PolicyDecisionID)
			}
			if msg, _ := e["message"].(string); msg != tc.denied {
				t.Errorf("message %q, want %q", msg, tc.denied)
			}
		})
	}
}

// 404 and 405 come before the key is looked at: with a valid key they are
// still in no tenant's audit tree.
func TestNotFoundAndMethodNotAllowed(t *testing.T) {
	audit := newAuditRecorder()
	s := newStack(t, stackConfig{audit: audit})
	defer func() {
		// Events are recorded before the response is sent: any would be
		// here by now.
		if n := len(audit.events); n > 0 {
			t.Errorf("%d requests refused by route or method were audited", n)
		}
	}()
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/v1/nope"},
		{http.MethodGet, "/"},
		{http.MethodPost, "/v1/chat"},
		{http.MethodGet, "/v2/models"},
		// Not canonical: http.ServeMux alone would redirect these.
		{http.MethodGet, "/v1//models"},
		{http.MethodGet, "//v1/models"},
		{http.MethodGet, "/v1/./models"},
		{http.MethodGet, "/v1/x/../models"},
		{http.MethodPost, "/v1//chat/completions"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			wantError(t, s.do(t, tc.method, tc.path, keyAll, ""), http.StatusNotFound, "not_found", "invalid_request_error", "")
		})
	}
	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodGet, chatPath, "POST"},
		{http.MethodPut, chatPath, "POST"},
		{http.MethodGet, embedPath, "POST"},
		{http.MethodDelete, embedPath, "POST"},
		{http.MethodPost, "/v1/models", "GET"},
		{http.MethodDelete, "/v1/models/builtin/echo", "GET"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := s.do(t, tc.method, tc.path, keyAll, "")
			wantError(t, r, http.StatusMethodNotAllowed, "method_not_allowed", "invalid_request_error", "")
			if got := r.header.Get("Allow"); got != tc.allow {
				t.Errorf("Allow %q, want %q", got, tc.allow)
			}
		})
	}
	// HEAD only on /healthz (docs/gateway-api.md); a HEAD answer has no body.
	t.Run("HEAD /v1/models", func(t *testing.T) {
		r := s.do(t, http.MethodHead, "/v1/models", keyAll, "")
		if r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != "GET" {
			t.Errorf("HEAD /v1/models: %d, Allow %q; want 405, GET", r.status, r.header.Get("Allow"))
		}
	})
}

func TestModelUnavailable(t *testing.T) {
	eachTransport(t, stackConfig{}, func(t *testing.T, s *stack) {
		for _, tc := range []struct{ name, path, body string }{
			{"chat, unknown namespace", chatPath, `{"model":"vllm/x",` + hi + `}`},
			{"chat, unknown builtin", chatPath, `{"model":"builtin/nope",` + hi + `}`},
			{"streamed chat", chatPath, `{"model":"vllm/x","stream":true,` + hi + `}`},
			{"embeddings, unknown namespace", embedPath, `{"model":"vllm/x","input":"x"}`},
			{"embeddings, unknown builtin", embedPath, `{"model":"builtin/nope","input":"x"}`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := s.post(t, tc.path, keyAll, tc.body)
				wantError(t, r, http.StatusServiceUnavailable, "model_unavailable", "server_error", "")
				// A mistyped model stays unknown: the SDKs must not
				// retry it (they honour x-should-retry).
				if got := r.header.Get("x-should-retry"); got != "false" {
					t.Errorf("x-should-retry %q, want false", got)
				}
			})
		}
	})
}

// countingReader counts the bytes the handler read of a request body.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

const bodyLimit = 1024

// padded is a valid request body for path of exactly n bytes.
func padded(path string, n int) string {
	body := `{"model":"builtin/echo",` + hi + `}`
	if path == embedPath {
		body = `{"model":"builtin/embed","input":"x"}`
	}
	return body + strings.Repeat(" ", n-len(body))
}

// The limit is inclusive; one byte more is 413, whether announced by
// Content-Length or not, and the handler reads no further than the limit.
func TestBodyTooLarge(t *testing.T) {
	s := newStack(t, stackConfig{maxBodyBytes: bodyLimit})
	for _, path := range []string{chatPath, embedPath} {
		t.Run(path, func(t *testing.T) {
			wantOK(t, s.post(t, path, keyAll, padded(path, bodyLimit)))
			r := s.post(t, path, keyAll, padded(path, bodyLimit+1))
			e := wantError(t, r, http.StatusRequestEntityTooLarge, "request_too_large", "invalid_request_error", "")
			if !strings.Contains(fmt.Sprint(e["message"]), "1 KiB") {
				t.Errorf("message %q does not name the limit", e["message"])
			}

			for _, tc := range []struct {
				name          string
				contentLength int64
				maxRead       int
			}{
				{"Content-Length", 2048, 0},
				{"chunked", -1, bodyLimit + 1},
			} {
				t.Run(tc.name, func(t *testing.T) {
					body := &countingReader{r: strings.NewReader(padded(path, 2048))}
					req := httptest.NewRequest(http.MethodPost, path, body)
					req.ContentLength = tc.contentLength
					req.Header.Set("Authorization", "Bearer "+keyAll)
					rec := httptest.NewRecorder()
					s.edge.ServeHTTP(rec, req)
					r := response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
					wantError(t, r, http.StatusRequestEntityTooLarge, "request_too_large", "invalid_request_error", "")
					if body.n > tc.maxRead {
						t.Errorf("handler read %d bytes of the body, want at most %d", body.n, tc.maxRead)
					}
				})
			}
		})
	}
}

// A client that sends the first KiB of a 2 KiB body and then stalls still
// gets its 413: the server reads nothing past the limit, whether the size
// was announced by Content-Length or the body is chunked.
func TestBodyTooLargeStalledClient(t *testing.T) {
	s := newStack(t, stackConfig{maxBodyBytes: bodyLimit})
	host := s.host()
	head := "POST " + chatPath + " HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + keyAll + "\r\nContent-Type: application/json\r\n"
	first := padded(chatPath, 2048)[:bodyLimit]
	var chunked strings.Builder
	for i := 0; i < 2048; i += 256 {
		fmt.Fprintf(&chunked, "%x\r\n%s\r\n", 256, padded(chatPath, 2048)[i:i+256])
	}
	for _, tc := range []struct{ name, request string }{
		{"Content-Length", head + "Content-Length: 2048\r\n\r\n" + first},
		{"chunked", head + "Transfer-Encoding: chunked\r\n\r\n" + chunked.String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The rest of the body never comes.
			r := readRaw(t, s.sendRaw(t, tc.request), "while the client stalls")
			wantError(t, r, http.StatusRequestEntityTooLarge, "request_too_large", "invalid_request_error", "")
		})
	}
}

// A body with a Content-Encoding other than identity is 415 in the
// envelope and recorded with that status: the edge never decodes bodies,
// so a compressed one would otherwise be "malformed JSON" and a plain one
// labelled compressed would be served under a false label.
func TestContentEncodingRefused(t *testing.T) {
	audit := newAuditRecorder()
	s := newStack(t, stackConfig{audit: audit})
	body := `{"model":"builtin/echo",` + hi + `}`
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(body))
	_ = zw.Close()
	for _, tc := range []struct {
		name, encoding, body string
		status               int
	}{
		{"gzip body", "gzip", gz.String(), http.StatusUnsupportedMediaType},
		{"plain body labelled br", "br", body, http.StatusUnsupportedMediaType},
		{"identity then gzip", "identity, gzip", body, http.StatusUnsupportedMediaType},
		{"identity", "identity", body, http.StatusOK},
		{"IDENTITY", "IDENTITY", body, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := s.newRequest(t, http.MethodPost, chatPath, keyAll, tc.body)
			req.Header.Set("Content-Encoding", tc.encoding)
			r := s.send(t, req)
			if tc.status == http.StatusOK {
				wantOK(t, r)
			} else {
				wantError(t, r, tc.status, "unsupported_media_type", "invalid_request_error", "")
			}
			if ev := audit.next(t); ev.Status != tc.status || ev.RequestID != r.id() {
				t.Errorf("recorded %s with status %d, want %s with %d", ev.RequestID, ev.Status, r.id(), tc.status)
			}
		})
	}
}

// A client that stalls its body gets its answer at once when the edge
// refuses the request without reading the body (no key, no route, wrong
// method, a GET) and at BodyReadTimeout otherwise (408), and then the
// connection is closed: the stalled body holds neither the connection
// nor its goroutine. Before, net/http waited for the unread body with no
// deadline, before answering or before closing.
func TestStalledUnreadBodyReleasesTheConnection(t *testing.T) {
	s := newStack(t, stackConfig{bodyReadTimeout: 50 * time.Millisecond})
	for _, tc := range []struct {
		name, method, path, key string
		status                  int
	}{
		{"no key", http.MethodPost, chatPath, "", http.StatusUnauthorized},
		{"unknown key", http.MethodPost, chatPath, "tgk_unknown", http.StatusUnauthorized},
		{"no route", http.MethodPost, "/v1/nope", keyAll, http.StatusNotFound},
		{"not canonical", http.MethodPost, "/v1//chat/completions", keyAll, http.StatusNotFound},
		{"wrong method", http.MethodPost, "/v1/models", keyAll, http.StatusMethodNotAllowed},
		{"GET with a body", http.MethodGet, "/v1/models", keyAll, http.StatusOK},
		{"health, wrong method", http.MethodPost, "/healthz", "", http.StatusMethodNotAllowed},
		{"body deadline", http.MethodPost, chatPath, keyAll, http.StatusRequestTimeout},
	} {
		for _, stalled := range webtest.StalledBodies {
			t.Run(tc.name+" "+strings.Fields(stalled)[0], func(t *testing.T) {
				t.Parallel()
				auth := ""
				if tc.key != "" {
					auth = "Authorization: Bearer " + tc.key + "\r\n"
				}
				webtest.WantAnswerThenClose(t, s.host(), tc.method+" "+tc.path+" HTTP/1.1\r\nHost: "+s.host()+"\r\n"+auth+stalled, tc.status)
			})
		}
	}
}

// A client that sends its headers and part of its body, then stalls, gets
// 408 request_timeout in the envelope once BodyReadTimeout has passed,
// whether it announced the size or sends chunks, and the request is
// recorded with that status.
func TestBodyReadTimeout(t *testing.T) {
	audit := newAuditRecorder()
	s := newStack(t, stackConfig{audit: audit, bodyReadTimeout: 50 * time.Millisecond})
	host := s.host()
	body := `{"model":"builtin/echo",` + hi + `}`
	for _, path := range []string{chatPath, embedPath} {
		head := "POST " + path + " HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + keyAll + "\r\n"
		for _, tc := range []struct{ name, request string }{
			{"Content-Length", head + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body[:10]},
			{"chunked", head + "Transfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x\r\n%s\r\n", 10, body[:10])},
		} {
			t.Run(path+" "+tc.name, func(t *testing.T) {
				r := readRaw(t, s.sendRaw(t, tc.request), "while the body stalls")
				wantError(t, r, http.StatusRequestTimeout, "request_timeout", "invalid_request_error", "")
				if ev := audit.next(t); ev.Status != http.StatusRequestTimeout || ev.RequestID != r.id() {
					t.Errorf("recorded %s with status %d, want %s with 408", ev.RequestID, ev.Status, r.id())
				}
			})
		}
	}
}

// BodyReadTimeout bounds the body alone: a reply that takes longer than
// it, plain or streamed, is not cut. Over HTTP/1.1 net/http itself clears
// the read deadline once a body has been read to its end, so this pins
// that behaviour as much as readBody's own clearing (which matters where
// a body is not read to its end, and for HTTP/2 streams).
func TestBodyReadTimeoutSparesTheReply(t *testing.T) {
	// The deadline is wide enough for a loaded machine to read a small
	// body in time; the engine pauses 150 ms between pieces, so the reply
	// still outlasts it several times over.
	s := newStack(t, stackConfig{bodyReadTimeout: 100 * time.Millisecond})
	for _, stream := range []bool{false, true} {
		r := s.post(t, chatPath, keyAll, fmt.Sprintf(`{"model":"builtin/echo","stream":%t,"messages":[{"role":"user","content":"/delay 150 a b c d"}]}`, stream))
		whole := strings.Contains(string(r.body), `"content":"a b c d"`)
		if stream {
			whole = strings.HasSuffix(string(r.body), "data: [DONE]\n\n")
		}
		if r.status != http.StatusOK || !whole {
			t.Errorf("stream %t: %d %s", stream, r.status, r.body)
		}
	}
}

// The audit endpoints are the central plane's alone: the gateway's /v1 is
// the OpenAI surface, and an audit path there is 404 in its envelope,
// with a key or without one (docs/central.md, "Where the audit endpoints
// are served").
func TestAuditPathsAreNotOnTheGateway(t *testing.T) {
	s := newStack(t, stackConfig{})
	for _, path := range []string{
		"/v1/tenants/ten_test/audit/heads?day=2026-03-01",
		"/v1/tenants/ten_test/audit/proof?appliance_id=app_test&day=2026-03-01&request_id=req_x",
		"/v1/tenants/ten_test/audit/forks",
		"/v1/openapi.json",
	} {
		for _, key := range []string{keyAll, ""} {
			t.Run(fmt.Sprintf("%s key=%t", path, key != ""), func(t *testing.T) {
				wantError(t, s.do(t, http.MethodGet, path, key, ""), http.StatusNotFound, "not_found", "invalid_request_error", "")
			})
		}
	}
}

// The gateway answers no CORS preflight and sends no Access-Control-*
// header: a browser page must not hold a virtual key (docs/gateway-api.md,
// "No CORS").
func TestNoCORS(t *testing.T) {
	s := newStack(t, stackConfig{})
	for _, method := range []string{http.MethodOptions, http.MethodPost, http.MethodGet} {
		t.Run(method, func(t *testing.T) {
			path, body := chatPath, ""
			if method == http.MethodGet {
				path = "/v1/models"
			}
			if method == http.MethodPost {
				body = `{"model":"builtin/echo","messages":[{"role":"user","content":"hi"}]}`
			}
			req := s.newRequest(t, method, path, keyAll, body)
			req.Header.Set("Origin", "https://app.example")
			req.Header.Set("Access-Control-Request-Method", "POST")
			req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
			r := s.send(t, req)
			for name := range r.header {
				if strings.HasPrefix(strings.ToLower(name), "access-control-") {
					t.Errorf("%s %s answered %s: %s", method, path, name, r.header.Get(name))
				}
			}
			if method == http.MethodOptions {
				wantError(t, r, http.StatusMethodNotAllowed, "method_not_allowed", "invalid_request_error", "")
			}
		})
	}
}

// CONNECT, whose target is a host and not a path, gets the envelope like
// any other request outside the routes: http.ServeMux alone answers it
// with a plain-text 404.
func TestConnectIsNotFoundInTheEnvelope(t *testing.T) {
	s := newStack(t, stackConfig{})
	conn := s.sendRaw(t, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nAuthorization: Bearer "+keyAll+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, response{status: resp.StatusCode, header: resp.Header, body: body}, http.StatusNotFound, "not_found", "invalid_request_error", "")
}

// A text over the inference API's size bounds is refused at decode, with
// the field as the client sent it in param and the message: not the
// inference API's names (messages[0].text, inputs[0].text) relayed
// without a param. The bounds are docs/gateway-api.md's.
func TestTextSizeErrorsNameTheField(t *testing.T) {
	s := newStack(t, stackConfig{maxBodyBytes: 12 << 20})
	big := func(n int) string { return strings.Repeat("a", n) }
	const chatMax, embedMax = 4 << 20, 1 << 20
	for _, tc := range []struct{ name, path, body, param string }{
		{"content string", chatPath, `{"model":"builtin/echo","messages":[{"role":"user","content":"` + big(chatMax+1) + `"}]}`, "messages[0].content"},
		{"text part", chatPath, `{"model":"builtin/echo","messages":[{"role":"user","content":"hi"},{"role":"user","content":[{"type":"text","text":"x"},{"type":"text","text":"` + big(chatMax+1) + `"}]}]}`, "messages[1].content[1].text"},
		{"reasoning", chatPath, `{"model":"builtin/echo","messages":[{"role":"assistant","content":"x","reasoning":"` + big(chatMax+1) + `"},{"role":"user","content":"hi"}]}`, "messages[0].reasoning"},
		{"embeddings input", embedPath, `{"model":"builtin/embed","input":"` + big(embedMax+1) + `"}`, "input"},
		{"embeddings input list", embedPath, `{"model":"builtin/embed","input":["x","` + big(embedMax+1) + `"]}`, "input[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := wantError(t, s.post(t, tc.path, keyAll, tc.body), http.StatusBadRequest, "invalid_request", "invalid_request_error", tc.param)
			if msg, _ := e["message"].(string); !strings.HasPrefix(msg, tc.param+" is ") {
				t.Errorf("message %q does not name %s", msg, tc.param)
			}
		})
	}
	// At the bound, the text is served.
	wantOK(t, s.post(t, embedPath, keyAll, `{"model":"builtin/embed","input":"`+big(embedMax)+`"}`))
}

// A bound the edge does not check when it decodes (here a tool's
// description, over the inference API's 64 KiB) is refused by the
// inference API's validation, and still reaches the client in the words
// of its request, with param.
func TestEngineValidationNamesTheField(t *testing.T) {
	s := newStack(t, stackConfig{local: true})
	body := `{"model":"builtin/echo","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"get_weather","description":"` +
		strings.Repeat("d", 64<<10+1) + `","parameters":{"type":"object"}}}]}`
	e := wantError(t, s.post(t, chatPath, keyTool, body), http.StatusBadRequest, "invalid_request", "invalid_request_error", "tools[0].function.description")
	if msg, _ := e["message"].(string); !strings.HasPrefix(msg, "tools[0].function.description: ") {
		t.Errorf("message %q", msg)
	}
}
