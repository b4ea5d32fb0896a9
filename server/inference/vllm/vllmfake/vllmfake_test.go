package vllmfake_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/server/inference/vllm/vllmfake"
)

const llama = "meta-llama/Llama-3.1-8B-Instruct"

var (
	createdRe = regexp.MustCompile(`"created":\d+`)
	toolIDRe  = regexp.MustCompile(`chatcmpl-tool-[0-9a-f]{32}`)
	permIDRe  = regexp.MustCompile(`modelperm-[0-9a-f]{32}`)
)

// normalise blanks out what changes between runs: timestamps and random ids.
func normalise(s string) string {
	s = createdRe.ReplaceAllString(s, `"created":0`)
	s = toolIDRe.ReplaceAllString(s, "chatcmpl-tool-X")
	return permIDRe.ReplaceAllString(s, "modelperm-X")
}

type call struct {
	method, path, body string
	header             map[string]string
}

func do(t *testing.T, s *vllmfake.Server, c call) (int, http.Header, string) {
	t.Helper()
	method := c.method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequest(method, s.URL+c.path, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-Request-Id", "req1")
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, normalise(string(b))
}

// frames splits an SSE body into its data payloads, checking the framing.
func frames(t *testing.T, body string) []string {
	t.Helper()
	if !strings.HasSuffix(body, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", body)
	}
	var out []string
	for _, f := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		d, ok := strings.CutPrefix(f, "data: ")
		if !ok {
			t.Fatalf("frame %q is not `data: ...`", f)
		}
		out = append(out, d)
	}
	return out
}

const head = `{"id":"chatcmpl-req1","object":"chat.completion.chunk","created":0,"model":"` + llama + `",`

func TestChat(t *testing.T) {
	// The prompt "<|user|>\nhello big world\n<|assistant|>\n" is 5 tokens.
	user := `"messages":[{"role":"user","content":"hello big world"}]`
	tests := []struct {
		name   string
		body   string
		status int
		want   string   // whole body, when not streamed
		frames []string // data payloads, when streamed
	}{{
		name:   "plain reply",
		body:   `{"model":"` + llama + `",` + user + `}`,
		status: http.StatusOK,
		want: `{"id":"chatcmpl-req1","object":"chat.completion","created":0,"model":"` + llama + `",` +
			`"choices":[{"index":0,"message":{"role":"assistant","content":"hello big world","refusal":null,"annotations":null,"audio":null,"function_call":null,"tool_calls":[],"reasoning":null},` +
			`"logprobs":null,"finish_reason":"stop","stop_reason":null,"token_ids":null}],` +
			`"service_tier":null,"system_fingerprint":null,` +
			`"usage":{"prompt_tokens":5,"total_tokens":9,"completion_tokens":4,"prompt_tokens_details":null},` +
			`"prompt_logprobs":null,"prompt_token_ids":null,"kv_transfer_params":null}`,
	}, {
		name:   "max_tokens cuts with length",
		body:   `{` + user + `,"max_tokens":2}`,
		status: http.StatusOK,
		want:   `"content":"hello big ",`,
	}, {
		name:   "stop string cuts with stop",
		body:   `{` + user + `,"stop":["wor"],"temperature":0.2,"top_p":0.9,"seed":7}`,
		status: http.StatusOK,
		want:   `"content":"hello big ",`,
	}, {
		name:   "json response format",
		body:   `{` + user + `,"response_format":{"type":"json_object"}}`,
		status: http.StatusOK,
		want:   `"content":"{\"text\":\"hello big world\"}",`,
	}, {
		name:   "stream with usage",
		body:   `{` + user + `,"stream":true,"stream_options":{"include_usage":true}}`,
		status: http.StatusOK,
		frames: []string{
			head + `"choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning_content":null},"logprobs":null,"finish_reason":null}],"prompt_token_ids":null}`,
			head + `"choices":[{"index":0,"delta":{"content":"hello ","reasoning_content":null},"logprobs":null,"finish_reason":null,"token_ids":null}]}`,
			head + `"choices":[{"index":0,"delta":{"content":"big ","reasoning_content":null},"logprobs":null,"finish_reason":null,"token_ids":null}]}`,
			head + `"choices":[{"index":0,"delta":{"content":"world","reasoning_content":null},"logprobs":null,"finish_reason":null,"token_ids":null}]}`,
			head + `"choices":[{"index":0,"delta":{"content":"","reasoning_content":null},"logprobs":null,"finish_reason":"stop","stop_reason":null,"token_ids":null}]}`,
			head + `"choices":[],"usage":{"prompt_tokens":5,"total_tokens":9,"completion_tokens":4}}`,
			`[DONE]`,
		},
	}, {
		name:   "stream cut by max_completion_tokens, no usage",
		body:   `{` + user + `,"stream":true,"max_completion_tokens":1}`,
		status: http.StatusOK,
		frames: []string{
			head + `"choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning_content":null},"logprobs":null,"finish_reason":null}],"prompt_token_ids":null}`,
			head + `"choices":[{"index":0,"delta":{"content":"hello ","reasoning_content":null},"logprobs":null,"finish_reason":"length","stop_reason":null,"token_ids":null}]}`,
			`[DONE]`,
		},
	}, {
		name:   "stream with continuous usage",
		body:   `{` + user + `,"stream":true,"max_tokens":1,"stream_options":{"continuous_usage_stats":true}}`,
		status: http.StatusOK,
		frames: []string{
			head + `"choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning_content":null},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":5,"total_tokens":5,"completion_tokens":0},"prompt_token_ids":null}`,
			head + `"choices":[{"index":0,"delta":{"content":"hello ","reasoning_content":null},"logprobs":null,"finish_reason":"length","stop_reason":null,"token_ids":null}],"usage":{"prompt_tokens":5,"total_tokens":6,"completion_tokens":1}}`,
			head + `"choices":[],"usage":{"prompt_tokens":5,"total_tokens":6,"completion_tokens":1}}`,
			`[DONE]`,
		},
	}, {
		name:   "stream stopped by a stop string",
		body:   `{` + user + `,"stream":true,"stop":"big"}`,
		status: http.StatusOK,
		frames: []string{
			head + `"choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning_content":null},"logprobs":null,"finish_reason":null}],"prompt_token_ids":null}`,
			head + `"choices":[{"index":0,"delta":{"content":"hello ","reasoning_content":null},"logprobs":null,"finish_reason":null,"token_ids":null}]}`,
			head + `"choices":[{"index":0,"delta":{"content":"","reasoning_content":null},"logprobs":null,"finish_reason":"stop","stop_reason":"big","token_ids":null}]}`,
			`[DONE]`,
		},
	}, {
		name:   "unknown model",
		body:   `{"model":"nope",` + user + `}`,
		status: http.StatusNotFound,
		want:   `{"error":{"message":"The model ` + "`nope`" + ` does not exist.","type":"NotFoundError","param":"model","code":404}}`,
	}, {
		name:   "malformed JSON",
		body:   `{"messages":`,
		status: http.StatusBadRequest,
		want:   `"type":"Bad Request","param":"body.12","code":400}}`,
	}, {
		name:   "wrong type",
		body:   `{` + user + `,"max_tokens":"ten"}`,
		status: http.StatusBadRequest,
		want:   `{"error":{"message":"1 validation error:\n  {'type': 'int_type', 'loc': 'body.max_tokens', 'msg': 'Input should be a valid integer', 'input': 'ten'}","type":"Bad Request","param":"body.max_tokens","code":400}}`,
	}, {
		name:   "missing messages",
		body:   `{"model":"` + llama + `"}`,
		status: http.StatusBadRequest,
		want:   `'type': 'missing', 'loc': 'body.messages', 'msg': 'Field required'`,
	}, {
		name:   "stream_options without stream",
		body:   `{` + user + `,"stream_options":{"include_usage":true}}`,
		status: http.StatusBadRequest,
		want:   `Value error, Stream options can only be defined when ` + "`stream=True`" + `.', 'input': '<dict of 2 items>', 'ctx': {'error': VLLMValidationError('Stream options can only be defined when ` + "`stream=True`" + `.')}}","type":"Bad Request","param":"stream_options","code":400}}`,
	}, {
		name:   "malformed JSON inside",
		body:   `{"messages": x}`,
		status: http.StatusBadRequest,
		want:   `"param":"body.13","code":400}}`,
	}, {
		name:   "prompt longer than the context",
		body:   `{` + user + `,"max_tokens":8190}`,
		status: http.StatusBadRequest,
		want:   `{"error":{"message":"'max_tokens' or 'max_completion_tokens' is too large: 8190. This model's maximum context length is 8192 tokens and your request has 5 input tokens (8190 \u003e 8192 - 5).","type":"BadRequestError","param":"max_tokens","code":400}}`,
	}}
	s := vllmfake.Start(t, vllmfake.Model{ID: llama})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, header, body := do(t, s, call{path: "/v1/chat/completions", body: tt.body})
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, body)
			}
			if tt.frames != nil {
				if ct := header.Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
					t.Errorf("Content-Type %q", ct)
				}
				got := frames(t, body)
				for i := range max(len(got), len(tt.frames)) {
					var g, w string
					if i < len(got) {
						g = got[i]
					}
					if i < len(tt.frames) {
						w = tt.frames[i]
					}
					if g != w {
						t.Errorf("frame %d:\n got %s\nwant %s", i, g, w)
					}
				}
				return
			}
			if ct := header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			want := strings.ReplaceAll(tt.want, `\u003e`, ">")
			if strings.HasPrefix(want, "{") && body != want || !strings.Contains(body, want) {
				t.Errorf("body\n got %s\nwant %s", body, want)
			}
		})
	}
}

var weather = `{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}`

func TestToolCall(t *testing.T) {
	s := vllmfake.Start(t)
	msgs := `"messages":[{"role":"user","content":"/tool get_weather {\"city\":\"Paris\",\"days\":2}"}],"tools":[` + weather + `]`

	_, _, body := do(t, s, call{path: "/v1/chat/completions", body: `{` + msgs + `}`})
	want := `"message":{"role":"assistant","content":null,"refusal":null,"annotations":null,"audio":null,"function_call":null,` +
		`"tool_calls":[{"id":"chatcmpl-tool-X","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\", \"days\": 2}"}}],"reasoning":null},` +
		`"logprobs":null,"finish_reason":"tool_calls","stop_reason":null,"token_ids":null}]`
	if !strings.Contains(body, want) {
		t.Errorf("reply\n got %s\nwant %s", body, want)
	}

	_, _, body = do(t, s, call{path: "/v1/chat/completions", body: `{` + msgs + `,"stream":true,"stream_options":{}}`})
	wantFrames := []string{
		head + `"choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning_content":null},"logprobs":null,"finish_reason":null}],"prompt_token_ids":null}`,
		head + `"choices":[{"index":0,"delta":{"reasoning_content":null,"tool_calls":[{"id":"chatcmpl-tool-X","type":"function","index":0,"function":{"name":"get_weather"}}]},"logprobs":null,"finish_reason":null,"token_ids":null}]}`,
		head + `"choices":[{"index":0,"delta":{"reasoning_content":null,"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": "}}]},"logprobs":null,"finish_reason":null,"token_ids":null}]}`,
		head + `"choices":[{"index":0,"delta":{"reasoning_content":null,"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\", "}}]},"logprobs":null,"finish_reason":null,"token_ids":null}]}`,
		head + `"choices":[{"index":0,"delta":{"reasoning_content":null,"tool_calls":[{"index":0,"function":{"arguments":"\"days\": "}}]},"logprobs":null,"finish_reason":null,"token_ids":null}]}`,
		head + `"choices":[{"index":0,"delta":{"reasoning_content":null,"tool_calls":[{"index":0,"function":{"arguments":"2}"}}]},"logprobs":null,"finish_reason":null,"token_ids":null}]}`,
		head + `"choices":[{"index":0,"delta":{"reasoning_content":null},"logprobs":null,"finish_reason":"tool_calls","stop_reason":null,"token_ids":null}]}`,
		head + `"choices":[],"usage":{"prompt_tokens":7,"total_tokens":13,"completion_tokens":6}}`,
		`[DONE]`,
	}
	got := frames(t, body)
	if strings.Join(got, "\n") != strings.Join(wantFrames, "\n") {
		t.Errorf("frames\n got %s\nwant %s", strings.Join(got, "\n"), strings.Join(wantFrames, "\n"))
	}

	// tool_choice "none" keeps the echo.
	_, _, body = do(t, s, call{path: "/v1/chat/completions", body: `{` + msgs + `,"tool_choice":"none"}`})
	if !strings.Contains(body, `"finish_reason":"stop"`) || !strings.Contains(body, `"content":"/tool get_weather`) {
		t.Errorf("tool_choice none: %s", body)
	}
}

// The count /tokenize gives for messages and tools is the chat completion's
// prompt_tokens, as the engine relies on to reserve tokens.
func TestTokenizeAgreesWithUsage(t *testing.T) {
	s := vllmfake.Start(t)
	convs := []string{
		`"messages":[{"role":"user","content":"hi"}]`,
		`"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"one two"},{"type":"text","text":"three"}]}]`,
		`"messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"sunny"}],"tools":[` + weather + `]`,
	}
	for _, conv := range convs {
		_, _, tok := do(t, s, call{path: "/tokenize", body: `{"model":"` + llama + `",` + conv + `,"add_generation_prompt":true,"add_special_tokens":false}`})
		_, _, chat := do(t, s, call{path: "/v1/chat/completions", body: `{"model":"` + llama + `",` + conv + `}`})
		var tr struct {
			Count       int   `json:"count"`
			MaxModelLen int   `json:"max_model_len"`
			Tokens      []int `json:"tokens"`
		}
		var cr struct {
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(tok), &tr); err != nil {
			t.Fatal(err, tok)
		}
		if err := json.Unmarshal([]byte(chat), &cr); err != nil {
			t.Fatal(err, chat)
		}
		if tr.Count == 0 || tr.Count != cr.Usage.PromptTokens || len(tr.Tokens) != tr.Count || tr.MaxModelLen != 8192 {
			t.Errorf("%s: tokenize %s, chat prompt_tokens %d", conv, tok, cr.Usage.PromptTokens)
		}
	}

	// Exact bytes of both forms.
	_, _, body := do(t, s, call{path: "/tokenize", body: `{"prompt":"hello world","return_token_strs":true}`})
	ids, _ := vllmfake.Tokenize("hello world")
	want := `{"count":3,"max_model_len":8192,"tokens":[1,` + itoa(ids[0]) + `,` + itoa(ids[1]) + `],"token_strs":["<s>","hello","world"]}`
	if body != want {
		t.Errorf("tokenize\n got %s\nwant %s", body, want)
	}
	_, _, body = do(t, s, call{path: "/tokenize", body: `{"messages":[{"role":"user","content":"hi"}]}`})
	ids, _ = vllmfake.Tokenize("<|user|>\nhi\n<|assistant|>\n")
	want = `{"count":3,"max_model_len":8192,"tokens":[` + itoa(ids[0]) + `,` + itoa(ids[1]) + `,` + itoa(ids[2]) + `],"token_strs":null}`
	if body != want {
		t.Errorf("tokenize chat\n got %s\nwant %s", body, want)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestModelsAndHealth(t *testing.T) {
	s := vllmfake.Start(t, vllmfake.Model{ID: llama, MaxModelLen: 4096})
	status, _, body := do(t, s, call{method: http.MethodGet, path: "/v1/models"})
	want := `{"object":"list","data":[{"id":"` + llama + `","object":"model","created":0,"owned_by":"vllm","root":"` + llama + `","parent":null,"max_model_len":4096,` +
		`"permission":[{"id":"modelperm-X","object":"model_permission","created":0,"allow_create_engine":false,"allow_sampling":true,"allow_logprobs":true,"allow_search_indices":false,"allow_view":true,"allow_fine_tuning":false,"organization":"*","group":null,"is_blocking":false}]}]}`
	if status != http.StatusOK || body != want {
		t.Errorf("models %d\n got %s\nwant %s", status, body, want)
	}
	status, _, body = do(t, s, call{method: http.MethodGet, path: "/health"})
	if status != http.StatusOK || body != "" {
		t.Errorf("health %d %q", status, body)
	}
	status, _, body = do(t, s, call{path: "/v1/embeddings", body: `{"input":"x"}`})
	if status != http.StatusNotFound || body != `{"detail":"Not Found"}` {
		t.Errorf("embeddings on a chat model: %d %s", status, body)
	}
}

func TestEmbeddings(t *testing.T) {
	const e5 = "intfloat/e5-small"
	s := vllmfake.Start(t, vllmfake.Model{ID: e5, Embedding: true})
	tests := []struct {
		name, input string
		extra       string
		count, dim  int
		tokens      int
	}{
		{"string", `"hello world"`, "", 1, 16, 3},
		{"strings", `["a b","c"]`, "", 2, 16, 5},
		{"ids", `[5,6,7]`, "", 1, 16, 3},
		{"id lists", `[[5],[6,7]]`, `,"dimensions":4`, 2, 4, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := do(t, s, call{path: "/v1/embeddings", body: `{"model":"` + e5 + `","input":` + tt.input + tt.extra + `}`})
			if status != http.StatusOK {
				t.Fatalf("%d %s", status, body)
			}
			var r struct {
				ID     string `json:"id"`
				Object string `json:"object"`
				Data   []struct {
					Index     int       `json:"index"`
					Object    string    `json:"object"`
					Embedding []float64 `json:"embedding"`
				} `json:"data"`
			}
			if err := json.Unmarshal([]byte(body), &r); err != nil {
				t.Fatal(err)
			}
			if r.ID != "embd-req1" || r.Object != "list" || len(r.Data) != tt.count {
				t.Fatalf("%s", body)
			}
			for i, d := range r.Data {
				if d.Index != i || d.Object != "embedding" || len(d.Embedding) != tt.dim {
					t.Errorf("data %d: %+v", i, d)
				}
			}
			usage := `"usage":{"prompt_tokens":` + itoa(tt.tokens) + `,"total_tokens":` + itoa(tt.tokens) + `,"completion_tokens":0,"prompt_tokens_details":null}}`
			if !strings.HasSuffix(body, usage) || !strings.HasPrefix(body, `{"id":"embd-req1","object":"list","created":0,"model":"`+e5+`","data":[{"index":0,"object":"embedding","embedding":[`) {
				t.Errorf("body %s", body)
			}
		})
	}
	_, _, body := do(t, s, call{path: "/v1/embeddings", body: `{"input":"hi","encoding_format":"base64"}`})
	if !strings.Contains(body, `"embedding":"`) {
		t.Errorf("base64: %s", body)
	}
	status, _, body := do(t, s, call{path: "/v1/chat/completions", body: `{"messages":[]}`})
	if status != http.StatusNotFound || body != `{"detail":"Not Found"}` {
		t.Errorf("chat on an embedding model: %d %s", status, body)
	}
}

func TestFailNext(t *testing.T) {
	s := vllmfake.Start(t)
	s.FailNext("/v1/chat/completions", http.StatusServiceUnavailable, "overloaded")
	body := `{"messages":[{"role":"user","content":"x"}]}`
	status, _, got := do(t, s, call{path: "/v1/chat/completions", body: body})
	if status != http.StatusServiceUnavailable || got != `{"error":{"message":"overloaded","type":"Service Unavailable","param":null,"code":503}}` {
		t.Errorf("%d %s", status, got)
	}
	if status, _, _ := do(t, s, call{path: "/v1/chat/completions", body: body}); status != http.StatusOK {
		t.Errorf("second request: %d", status)
	}
	reqs := s.Requests("/v1/chat/completions")
	if len(reqs) != 2 || !bytes.Equal(reqs[0], []byte(body)) {
		t.Errorf("requests %q", reqs)
	}
}

func TestBreakStreamAfter(t *testing.T) {
	s := vllmfake.Start(t)
	s.BreakStreamAfter(2)
	body := `{"messages":[{"role":"user","content":"one two three"}],"stream":true,"stream_options":{"include_usage":true}}`
	status, _, got := do(t, s, call{path: "/v1/chat/completions", body: body})
	if status != http.StatusOK {
		t.Fatalf("%d", status)
	}
	want := []string{
		head + `"choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning_content":null},"logprobs":null,"finish_reason":null}],"prompt_token_ids":null}`,
		head + `"choices":[{"index":0,"delta":{"content":"one ","reasoning_content":null},"logprobs":null,"finish_reason":null,"token_ids":null}]}`,
		head + `"choices":[{"index":0,"delta":{"content":"two ","reasoning_content":null},"logprobs":null,"finish_reason":null,"token_ids":null}]}`,
		`{"error": {"message": "Internal server error", "type": "InternalServerError", "param": null, "code": 500}}`,
		`[DONE]`,
	}
	if g := frames(t, got); strings.Join(g, "\n") != strings.Join(want, "\n") {
		t.Errorf("frames\n got %s\nwant %s", strings.Join(g, "\n"), strings.Join(want, "\n"))
	}
	// Only the next stream breaks.
	_, _, got = do(t, s, call{path: "/v1/chat/completions", body: body})
	if strings.Contains(got, `"error"`) {
		t.Errorf("second stream broke: %s", got)
	}
}

func TestAPIKey(t *testing.T) {
	s := vllmfake.Start(t)
	s.SetAPIKey("sekret")
	chat := `{"messages":[{"role":"user","content":"x"}]}`
	tests := []struct {
		name, method, path, body, auth string
		status                         int
		want                           string
	}{
		{"no key", http.MethodPost, "/v1/chat/completions", chat, "", http.StatusUnauthorized, `{"error":"Unauthorized"}`},
		{"wrong key", http.MethodPost, "/v1/chat/completions", chat, "Bearer nope", http.StatusUnauthorized, `{"error":"Unauthorized"}`},
		{"models need it", http.MethodGet, "/v1/models", "", "", http.StatusUnauthorized, `{"error":"Unauthorized"}`},
		{"right key", http.MethodPost, "/v1/chat/completions", chat, "Bearer sekret", http.StatusOK, `"content":"x"`},
		{"scheme in any case", http.MethodGet, "/v1/models", "", "bearer sekret", http.StatusOK, `"object":"list"`},
		{"health is open", http.MethodGet, "/health", "", "", http.StatusOK, ""},
		{"tokenize is open", http.MethodPost, "/tokenize", `{"prompt":"a"}`, "", http.StatusOK, `"count":2`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{}
			if tt.auth != "" {
				h["Authorization"] = tt.auth
			}
			status, _, body := do(t, s, call{method: tt.method, path: tt.path, body: tt.body, header: h})
			if status != tt.status || !strings.Contains(body, tt.want) {
				t.Errorf("%d %s", status, body)
			}
		})
	}
	if n := len(s.Requests("/v1/chat/completions")); n != 1 {
		t.Errorf("%d chat requests recorded, want the authorised one", n)
	}
}

func TestNotJSON(t *testing.T) {
	s := vllmfake.Start(t)
	status, _, body := do(t, s, call{path: "/v1/chat/completions", body: `{}`, header: map[string]string{"Content-Type": "text/plain"}})
	want := `{"error":{"message":"1 validation error:\n  Unsupported Media Type: Only 'application/json' is allowed","type":"Bad Request","param":null,"code":400}}`
	if status != http.StatusBadRequest || body != want {
		t.Errorf("%d\n got %s\nwant %s", status, body, want)
	}
}

func TestToolChoice(t *testing.T) {
	s := vllmfake.Start(t)
	msgs := `"messages":[{"role":"user","content":"/tool get_weather {\"city\":\"Oslo\"}"}],"tools":[` + weather + `]`
	named := `,"tool_choice":{"type":"function","function":{"name":"get_weather"}}`

	// A named tool_choice finishes with "stop" and keeps the raw arguments.
	_, _, body := do(t, s, call{path: "/v1/chat/completions", body: `{` + msgs + named + `}`})
	want := `"message":{"role":"assistant","content":"","refusal":null,"annotations":null,"audio":null,"function_call":null,` +
		`"tool_calls":[{"id":"chatcmpl-tool-X","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}],"reasoning":null},` +
		`"logprobs":null,"finish_reason":"stop","stop_reason":null,"token_ids":null}]`
	if !strings.Contains(body, want) {
		t.Errorf("named\n got %s\nwant %s", body, want)
	}
	_, _, body = do(t, s, call{path: "/v1/chat/completions", body: `{` + msgs + named + `,"stream":true}`})
	wantFrames := []string{
		head + `"choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning_content":null},"logprobs":null,"finish_reason":null}],"prompt_token_ids":null}`,
		head + `"choices":[{"index":0,"delta":{"reasoning_content":null,"tool_calls":[{"id":"chatcmpl-tool-X","type":"function","index":0,"function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},"logprobs":null,"finish_reason":null,"token_ids":null}]}`,
		head + `"choices":[{"index":0,"delta":{"reasoning_content":null,"tool_calls":[{"index":0,"function":{"arguments":""}}]},"logprobs":null,"finish_reason":"stop","stop_reason":null,"token_ids":null}]}`,
		`[DONE]`,
	}
	if got := frames(t, body); strings.Join(got, "\n") != strings.Join(wantFrames, "\n") {
		t.Errorf("named stream\n got %s\nwant %s", strings.Join(got, "\n"), strings.Join(wantFrames, "\n"))
	}

	// "required" finishes with "tool_calls", content "".
	_, _, body = do(t, s, call{path: "/v1/chat/completions", body: `{` + msgs + `,"tool_choice":"required"}`})
	if !strings.Contains(body, `"content":"","refusal"`) || !strings.Contains(body, `"arguments":"{\"city\": \"Oslo\"}"`) || !strings.Contains(body, `"finish_reason":"tool_calls"`) {
		t.Errorf("required: %s", body)
	}

	for _, bad := range []string{
		`{"messages":[{"role":"user","content":"x"}],"tool_choice":"auto"}`,
		`{` + msgs + `,"tool_choice":"sometimes"}`,
		`{` + msgs + `,"tool_choice":{"type":"function","function":{"name":"other"}}}`,
	} {
		if status, _, body := do(t, s, call{path: "/v1/chat/completions", body: bad}); status != http.StatusBadRequest || !strings.Contains(body, `'type': 'value_error'`) {
			t.Errorf("%s: %d %s", bad, status, body)
		}
	}
}

// A reasoning model served with a reasoning parser: its thinking is
// `reasoning` in the message and in the deltas (with the deprecated
// copy), no chunk for the closing tag, and every token counted.
func TestReasoningModel(t *testing.T) {
	s := vllmfake.Start(t, vllmfake.Model{ID: llama, Reasoning: true})
	code, _, body := do(t, s, call{path: "/v1/chat/completions", body: `{"model":"` + llama + `","messages":[{"role":"user","content":"hi there"}]}`})
	if code != http.StatusOK || !strings.Contains(body, `"content":"hi there","refusal":null,"annotations":null,"audio":null,"function_call":null,"tool_calls":[],"reasoning":"The user wants their words back."}`) ||
		!strings.Contains(body, `"completion_tokens":10,`) {
		t.Fatalf("%d %s", code, body)
	}
	_, _, body = do(t, s, call{path: "/v1/chat/completions", body: `{"model":"` + llama + `","messages":[{"role":"user","content":"hi there"}],"stream":true}`})
	fs := frames(t, body)
	want := []string{
		`"delta":{"role":"assistant","content":"","reasoning_content":null}`,
		`"delta":{"reasoning":"The ","reasoning_content":"The "}`,
		`"delta":{"reasoning":"user ","reasoning_content":"user "}`,
	}
	for i, w := range want {
		if !strings.Contains(fs[i], w) {
			t.Fatalf("frame %d %s, want %s", i, fs[i], w)
		}
	}
	// Six pieces of thinking, none for the closing tag, then the reply.
	if !strings.Contains(fs[7], `"delta":{"content":"hi ","reasoning_content":null}`) {
		t.Fatalf("frame 7 %s", fs[7])
	}

	s.SetReasoningField("reasoning_content")
	_, _, body = do(t, s, call{path: "/v1/chat/completions", body: `{"model":"` + llama + `","messages":[{"role":"user","content":"hi"}],"stream":true}`})
	if fs := frames(t, body); !strings.Contains(fs[1], `"delta":{"reasoning_content":"The "}`) {
		t.Fatalf("before the rename: %s", fs[1])
	}
}

// reasoning_effort reaches a completion's template, as vLLM's
// build_chat_params puts it there, with the enable_thinking it implies
// unless the client set that; /tokenize does not know the field, so only
// chat_template_kwargs that carry the same make it count the same prompt.
func TestReasoningEffort(t *testing.T) {
	s := vllmfake.Start(t, vllmfake.Model{ID: llama, Reasoning: true})
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	type result struct {
		Count int `json:"count"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
		Choices []struct {
			Message struct {
				Reasoning *string `json:"reasoning"`
			} `json:"message"`
		} `json:"choices"`
	}
	post := func(path, fields string) result {
		t.Helper()
		code, _, body := do(t, s, call{path: path, body: `{"model":"` + llama + `",` + msgs + fields + `}`})
		var r result
		if err := json.Unmarshal([]byte(body), &r); code != http.StatusOK || err != nil {
			t.Fatalf("%s %s: %d %s", path, fields, code, body)
		}
		return r
	}
	count := func(prompt string) int { ids, _ := vllmfake.Tokenize(prompt); return len(ids) }
	cases := []struct {
		name, fields, kwargs string
		prompt               string
		thinks               bool
	}{
		{"high", `,"reasoning_effort":"high"`, `{"reasoning_effort":"high","enable_thinking":true}`,
			"Reasoning: high\n<|user|>\nhi\n<|assistant|>\n", true},
		{"none turns thinking off", `,"reasoning_effort":"none"`, `{"reasoning_effort":"none","enable_thinking":false}`,
			"Reasoning: none\n<|user|>\nhi\n<|assistant|>\n<think>\n\n</think>\n\n", false},
		{"the client's enable_thinking wins", `,"reasoning_effort":"none","chat_template_kwargs":{"enable_thinking":true}`, `{"reasoning_effort":"none","enable_thinking":true}`,
			"Reasoning: none\n<|user|>\nhi\n<|assistant|>\n", true},
		{"the client's enable_thinking false wins", `,"reasoning_effort":"low","chat_template_kwargs":{"enable_thinking":false}`, `{"reasoning_effort":"low","enable_thinking":false}`,
			"Reasoning: low\n<|user|>\nhi\n<|assistant|>\n<think>\n\n</think>\n\n", false},
		{"max, DeepSeek V4's", `,"reasoning_effort":"max"`, `{"reasoning_effort":"max","enable_thinking":true}`,
			"Reasoning: max\n<|user|>\nhi\n<|assistant|>\n", true},
		{"null is none", `,"reasoning_effort":null`, `{}`, "<|user|>\nhi\n<|assistant|>\n", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			chat := post("/v1/chat/completions", tc.fields)
			if chat.Usage.PromptTokens != count(tc.prompt) {
				t.Errorf("prompt_tokens %d, want %d for %q", chat.Usage.PromptTokens, count(tc.prompt), tc.prompt)
			}
			if thinks := chat.Choices[0].Message.Reasoning != nil; thinks != tc.thinks {
				t.Errorf("reasoning %v, want thinking %v", chat.Choices[0].Message.Reasoning, tc.thinks)
			}
			if tok := post("/tokenize", `,"chat_template_kwargs":`+tc.kwargs); tok.Count != chat.Usage.PromptTokens {
				t.Errorf("/tokenize with the merged options counts %d, the completion %d", tok.Count, chat.Usage.PromptTokens)
			}
		})
	}

	// /tokenize ignores a reasoning_effort of its own, as vLLM's does.
	if tok, chat := post("/tokenize", `,"reasoning_effort":"high"`), post("/v1/chat/completions", `,"reasoning_effort":"high"`); tok.Count == chat.Usage.PromptTokens || tok.Count != count("<|user|>\nhi\n<|assistant|>\n") {
		t.Errorf("/tokenize with reasoning_effort counts %d, the completion %d", tok.Count, chat.Usage.PromptTokens)
	}

	for _, bad := range []struct{ value, input string }{{`"extreme"`, `'extreme'`}, {`""`, `''`}, {`5`, `'5'`}} {
		code, _, body := do(t, s, call{path: "/v1/chat/completions", body: `{` + msgs + `,"reasoning_effort":` + bad.value + `}`})
		want := `{"error":{"message":"1 validation error:\n  {'type': 'literal_error', 'loc': 'body.reasoning_effort', ` +
			`'msg': \"Input should be 'none', 'minimal', 'low', 'medium', 'high', 'xhigh' or 'max'\", 'input': ` + bad.input + `, ` +
			`'ctx': {'expected': \"'none', 'minimal', 'low', 'medium', 'high', 'xhigh' or 'max'\"}}","type":"Bad Request","param":"body.reasoning_effort","code":400}}`
		if code != http.StatusBadRequest || body != want {
			t.Errorf("%s: %d\n got %s\nwant %s", bad.value, code, body, want)
		}
	}
}
