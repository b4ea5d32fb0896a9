package edge_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/server/inference"
	"github.com/tollgate-dev/tollgate/server/inference/vllm"
	"github.com/tollgate-dev/tollgate/server/inference/vllm/vllmfake"
)

// OpenAI's fields that Tollgate accepts and ignores (or passes on) are
// still refused with 400 when their JSON type or range is one OpenAI's API
// refuses, as docs/gateway-api.md says of every known field: a client
// that gets a 200 here would get a 400 from OpenAI. The types and ranges
// are those of OpenAI's API specification.
func TestKnownFieldsOfWrongTypeOrRange(t *testing.T) {
	const assistantCall = `{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"get_weather","arguments":"{}"}}]}`
	refused := []struct {
		name, path, body, param string
	}{
		{"user a number", chatPath, `{"model":"builtin/echo","user":5,` + hi + `}`, "user"},
		{"user an object", chatPath, `{"model":"builtin/echo","user":{"id":"u1"},` + hi + `}`, "user"},
		{"frequency_penalty a string", chatPath, `{"model":"builtin/echo","frequency_penalty":"x",` + hi + `}`, "frequency_penalty"},
		{"frequency_penalty 2.5", chatPath, `{"model":"builtin/echo","frequency_penalty":2.5,` + hi + `}`, "frequency_penalty"},
		{"presence_penalty 5", chatPath, `{"model":"builtin/echo","presence_penalty":5,` + hi + `}`, "presence_penalty"},
		{"presence_penalty -3", chatPath, `{"model":"builtin/echo","presence_penalty":-3,` + hi + `}`, "presence_penalty"},
		{"logit_bias a number", chatPath, `{"model":"builtin/echo","logit_bias":5,` + hi + `}`, "logit_bias"},
		{"logit_bias an array", chatPath, `{"model":"builtin/echo","logit_bias":[1],` + hi + `}`, "logit_bias"},
		{"logit_bias value a string", chatPath, `{"model":"builtin/echo","logit_bias":{"50256":"x"},` + hi + `}`, "logit_bias.50256"},
		{"logit_bias value fractional", chatPath, `{"model":"builtin/echo","logit_bias":{"50256":1.5},` + hi + `}`, "logit_bias.50256"},
		{"logit_bias value 101", chatPath, `{"model":"builtin/echo","logit_bias":{"9":1,"50256":101},` + hi + `}`, "logit_bias.50256"},
		{"logit_bias key not a token id", chatPath, `{"model":"builtin/echo","logit_bias":{"abc":1},` + hi + `}`, "logit_bias.abc"},
		{"logit_bias key negative", chatPath, `{"model":"builtin/echo","logit_bias":{"-1":1},` + hi + `}`, "logit_bias.-1"},
		{"logit_bias key with a leading zero", chatPath, `{"model":"builtin/echo","logit_bias":{"07":1},` + hi + `}`, "logit_bias.07"},
		{"logit_bias over 300 tokens", chatPath, `{"model":"builtin/echo","logit_bias":{` + manyBiases(301) + `},` + hi + `}`, "logit_bias"},
		{"logit_bias value -101", chatPath, `{"model":"builtin/echo","logit_bias":{"50256":-101},` + hi + `}`, "logit_bias.50256"},
		{"response_format a number", chatPath, `{"model":"builtin/echo","response_format":5,` + hi + `}`, "response_format"},
		{"response_format a string", chatPath, `{"model":"builtin/echo","response_format":"json_object",` + hi + `}`, "response_format"},
		{"response_format without type", chatPath, `{"model":"builtin/echo","response_format":{},` + hi + `}`, "response_format.type"},
		{"response_format type unknown", chatPath, `{"model":"builtin/echo","response_format":{"type":"xml"},` + hi + `}`, "response_format.type"},
		{"response_format json_schema missing", chatPath, `{"model":"builtin/echo","response_format":{"type":"json_schema"},` + hi + `}`, "response_format.json_schema"},
		{"response_format json_schema without name", chatPath, `{"model":"builtin/echo","response_format":{"type":"json_schema","json_schema":{"schema":{}}},` + hi + `}`, "response_format.json_schema.name"},
		{"response_format json_schema bad name", chatPath, `{"model":"builtin/echo","response_format":{"type":"json_schema","json_schema":{"name":"my schema"}},` + hi + `}`, "response_format.json_schema.name"},
		{"response_format json_schema schema a string", chatPath, `{"model":"builtin/echo","response_format":{"type":"json_schema","json_schema":{"name":"s","schema":"x"}},` + hi + `}`, "response_format.json_schema.schema"},
		{"response_format json_schema strict a string", chatPath, `{"model":"builtin/echo","response_format":{"type":"json_schema","json_schema":{"name":"s","strict":"yes"}},` + hi + `}`, "response_format.json_schema.strict"},
		{"parallel_tool_calls a string", chatPath, `{"model":"builtin/echo","parallel_tool_calls":"x",` + hi + `}`, "parallel_tool_calls"},
		{"parallel_tool_calls a number", chatPath, `{"model":"builtin/echo","parallel_tool_calls":1,` + hi + `}`, "parallel_tool_calls"},
		// OpenAI refuses it without tools, true or false.
		{"parallel_tool_calls without tools", chatPath, `{"model":"builtin/echo","parallel_tool_calls":true,` + hi + `}`, "parallel_tool_calls"},
		{"parallel_tool_calls false without tools", chatPath, `{"model":"builtin/echo","parallel_tool_calls":false,` + hi + `}`, "parallel_tool_calls"},
		{"parallel_tool_calls with empty tools", chatPath, `{"model":"builtin/echo","tools":[],"parallel_tool_calls":true,` + hi + `}`, "parallel_tool_calls"},
		{"content an empty array", chatPath, `{"model":"builtin/echo","messages":[{"role":"user","content":[]}]}`, "messages[0].content"},
		{"assistant content an empty array", chatPath, `{"model":"builtin/echo","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[]}]}`, "messages[1].content"},
		{"tool call without id", chatPath, `{"model":"builtin/echo","messages":[{"role":"user","content":"hi"},` + assistantCall + `]}`, "messages[1].tool_calls[0].id"},
		{"tool call with an empty id", chatPath, `{"model":"builtin/echo","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "messages[0].tool_calls[0].id"},
		{"chat_template_kwargs a string", chatPath, `{"model":"builtin/echo","chat_template_kwargs":"x",` + hi + `}`, "chat_template_kwargs"},
		{"chat_template_kwargs an array", chatPath, `{"model":"builtin/echo","chat_template_kwargs":[],` + hi + `}`, "chat_template_kwargs"},
		// vLLM lets these override the template's own arguments: tools
		// past the key's scopes and the policy, or a template of the
		// client's.
		{"chat_template_kwargs tools", chatPath, `{"model":"builtin/echo","tools":[],"chat_template_kwargs":{"tools":[{"type":"function","function":{"name":"delete_db"}}]},` + hi + `}`, "chat_template_kwargs.tools"},
		{"chat_template_kwargs chat_template", chatPath, `{"model":"builtin/echo","chat_template_kwargs":{"chat_template":"{{ x }}"},` + hi + `}`, "chat_template_kwargs.chat_template"},
		{"chat_template_kwargs documents", chatPath, `{"model":"builtin/echo","chat_template_kwargs":{"enable_thinking":true,"documents":[]},` + hi + `}`, "chat_template_kwargs.documents"},
		{"chat_template_kwargs enable_thinking a string", chatPath, `{"model":"builtin/echo","chat_template_kwargs":{"enable_thinking":"no"},` + hi + `}`, "chat_template_kwargs.enable_thinking"},
		{"chat_template_kwargs key twice", chatPath, `{"model":"builtin/echo","chat_template_kwargs":{"thinking":true,"thinking":false},` + hi + `}`, "chat_template_kwargs.thinking"},
		{"tool parameters not UTF-8", chatPath, "{\"model\":\"builtin/echo\",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"d\":\"\xff\"}}}]," + hi + "}", "tools[0].function.parameters"},
		{"json_schema schema not UTF-8", chatPath, "{\"model\":\"builtin/echo\",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"s\",\"schema\":{\"d\":\"\xff\"}}}," + hi + "}", "response_format.json_schema.schema"},
		{"reasoning_effort a number", chatPath, `{"model":"builtin/echo","reasoning_effort":1,` + hi + `}`, "reasoning_effort"},
		{"reasoning_effort an object", chatPath, `{"model":"builtin/echo","reasoning_effort":{"effort":"high"},` + hi + `}`, "reasoning_effort"},
		{"reasoning_effort empty", chatPath, `{"model":"builtin/echo","reasoning_effort":"",` + hi + `}`, "reasoning_effort"},
		{"reasoning_effort not a value", chatPath, `{"model":"builtin/echo","reasoning_effort":"extreme",` + hi + `}`, "reasoning_effort"},
		{"reasoning_effort in capitals", chatPath, `{"model":"builtin/echo","reasoning_effort":"High",` + hi + `}`, "reasoning_effort"},
		{"reasoning_effort auto", chatPath, `{"model":"builtin/echo","reasoning_effort":"auto",` + hi + `}`, "reasoning_effort"},
		{"reasoning on a user message", chatPath, `{"model":"builtin/echo","messages":[{"role":"user","content":"hi","reasoning":"x"}]}`, "messages[0].reasoning"},
		{"reasoning a number", chatPath, `{"model":"builtin/echo","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"a","reasoning":5}]}`, "messages[1].reasoning"},
		{"embeddings: negative token id", embedPath, `{"model":"builtin/embed","input":[-1]}`, "input[0]"},
		{"embeddings: negative token id, later", embedPath, `{"model":"builtin/embed","input":[5,0,-7]}`, "input[2]"},
		{"embeddings: negative token id in an array", embedPath, `{"model":"builtin/embed","input":[[1],[2,-3]]}`, "input[1][1]"},
		{"embeddings: user a number", embedPath, `{"model":"builtin/embed","input":"x","user":5}`, "user"},
	}
	accepted := []struct{ name, path, body string }{
		{"user a string", chatPath, `{"model":"builtin/echo","user":"u1",` + hi + `}`},
		{"user null", chatPath, `{"model":"builtin/echo","user":null,` + hi + `}`},
		{"penalties at their bounds", chatPath, `{"model":"builtin/echo","frequency_penalty":-2,"presence_penalty":2,` + hi + `}`},
		{"penalties null", chatPath, `{"model":"builtin/echo","frequency_penalty":null,"presence_penalty":null,` + hi + `}`},
		{"logit_bias at its bounds", chatPath, `{"model":"builtin/echo","logit_bias":{"50256":-100,"9":100},` + hi + `}`},
		{"logit_bias of 300 tokens", chatPath, `{"model":"builtin/echo","logit_bias":{` + manyBiases(300) + `},` + hi + `}`},
		{"logit_bias null", chatPath, `{"model":"builtin/echo","logit_bias":null,` + hi + `}`},
		{"response_format text", chatPath, `{"model":"builtin/echo","response_format":{"type":"text"},` + hi + `}`},
		{"response_format json_object", chatPath, `{"model":"builtin/echo","response_format":{"type":"json_object"},` + hi + `}`},
		{"response_format null", chatPath, `{"model":"builtin/echo","response_format":null,` + hi + `}`},
		{"parallel_tool_calls null without tools", chatPath, `{"model":"builtin/echo","parallel_tool_calls":null,` + hi + `}`},
		{"tool call with an id", chatPath, `{"model":"builtin/echo","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":"sunny"}]}`},
		{"chat_template_kwargs an object", chatPath, `{"model":"builtin/echo","chat_template_kwargs":{"enable_thinking":false,"thinking":true},` + hi + `}`},
		{"chat_template_kwargs empty", chatPath, `{"model":"builtin/echo","chat_template_kwargs":{},` + hi + `}`},
		{"chat_template_kwargs null", chatPath, `{"model":"builtin/echo","chat_template_kwargs":null,` + hi + `}`},
		{"reasoning_effort null", chatPath, `{"model":"builtin/echo","reasoning_effort":null,` + hi + `}`},
		{"reasoning_effort none", chatPath, `{"model":"builtin/echo","reasoning_effort":"none",` + hi + `}`},
		{"reasoning_effort minimal", chatPath, `{"model":"builtin/echo","reasoning_effort":"minimal",` + hi + `}`},
		{"reasoning_effort low", chatPath, `{"model":"builtin/echo","reasoning_effort":"low",` + hi + `}`},
		{"reasoning_effort medium", chatPath, `{"model":"builtin/echo","reasoning_effort":"medium",` + hi + `}`},
		{"reasoning_effort high", chatPath, `{"model":"builtin/echo","reasoning_effort":"high",` + hi + `}`},
		{"reasoning_effort xhigh", chatPath, `{"model":"builtin/echo","reasoning_effort":"xhigh",` + hi + `}`},
		{"reasoning_effort max", chatPath, `{"model":"builtin/echo","reasoning_effort":"max",` + hi + `}`},
		{"assistant reasoning", chatPath, `{"model":"builtin/echo","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"a","reasoning":"think"},{"role":"user","content":"b"}]}`},
		{"embeddings: token id 0", embedPath, `{"model":"builtin/embed","input":[0,1]}`},
		{"embeddings: user a string", embedPath, `{"model":"builtin/embed","input":"x","user":"u1"}`},
	}
	s := newStack(t, stackConfig{})
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, s.post(t, tc.path, keyAll, tc.body), http.StatusBadRequest, "invalid_request", "invalid_request_error", tc.param)
		})
	}
	for _, tc := range accepted {
		t.Run(tc.name, func(t *testing.T) {
			wantOK(t, s.post(t, tc.path, keyAll, tc.body))
		})
	}
}

// A number too large for its field is named as out of range, not as a
// number of the wrong type ("temperature must be a number, not number
// 1e400"); a fraction where an integer is expected is still a type error.
func TestNumberOutOfRange(t *testing.T) {
	cases := []struct {
		name, path, body, param, message string
	}{
		{"temperature 1e400", chatPath, `{"model":"builtin/echo","temperature":1e400,` + hi + `}`, "temperature", "temperature 1e400 is out of range [0, 2]"},
		{"temperature -1e400", chatPath, `{"model":"builtin/echo","temperature":-1e400,` + hi + `}`, "temperature", "temperature -1e400 is out of range [0, 2]"},
		{"top_p 1e309", chatPath, `{"model":"builtin/echo","top_p":1e309,` + hi + `}`, "top_p", "top_p 1e309 is out of range [0, 1]"},
		{"frequency_penalty 1e400", chatPath, `{"model":"builtin/echo","frequency_penalty":1e400,` + hi + `}`, "frequency_penalty", "frequency_penalty 1e400 is out of range [-2, 2]"},
		{"max_tokens 2^64", chatPath, `{"model":"builtin/echo","max_tokens":18446744073709551616,` + hi + `}`, "max_tokens", "max_tokens 18446744073709551616 is out of range"},
		{"max_tokens 1e30", chatPath, `{"model":"builtin/echo","max_tokens":1e30,` + hi + `}`, "max_tokens", "max_tokens 1e30 is out of range"},
		{"seed -2^63-1", chatPath, `{"model":"builtin/echo","seed":-9223372036854775809,` + hi + `}`, "seed", "seed -9223372036854775809 is out of range"},
		{"logit_bias 1e400", chatPath, `{"model":"builtin/echo","logit_bias":{"7":1e400},` + hi + `}`, "logit_bias.7", "logit_bias.7 1e400 is out of range [-100, 100]"},
		{"dimensions 1e400", embedPath, `{"model":"builtin/embed","input":"x","dimensions":1e400}`, "dimensions", "dimensions 1e400 is out of range"},
		// Type errors still.
		{"max_tokens 1.5", chatPath, `{"model":"builtin/echo","max_tokens":1.5,` + hi + `}`, "max_tokens", "max_tokens must be an integer, not number 1.5"},
		{"max_tokens 1e2", chatPath, `{"model":"builtin/echo","max_tokens":1e2,` + hi + `}`, "max_tokens", "max_tokens must be an integer, not number 1e2"},
	}
	s := newStack(t, stackConfig{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := wantError(t, s.post(t, tc.path, keyAll, tc.body), http.StatusBadRequest, "invalid_request", "invalid_request_error", tc.param)
			if e["message"] != tc.message {
				t.Errorf("message %q, want %q", e["message"], tc.message)
			}
		})
	}
}

// response_format reaches the engine, which enforces it or refuses the
// request: builtin/echo answers JSON mode with a JSON object and cannot
// follow a schema (docs/builtin-engine.md).
func TestResponseFormatReachesTheEngine(t *testing.T) {
	s := newStack(t, stackConfig{})
	cases := []struct{ name, format, content string }{
		{"absent", ``, `hi`},
		{"text", `"response_format":{"type":"text"},`, `hi`},
		{"json_object", `"response_format":{"type":"json_object"},`, `{"text":"hi"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := wantOK(t, s.post(t, chatPath, keyAll, `{"model":"builtin/echo",`+tc.format+hi+`}`))
			var out struct {
				Choices []struct {
					Message struct{ Content string } `json:"message"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(body, &out); err != nil || len(out.Choices) != 1 {
				t.Fatalf("reply %s: %v", body, err)
			}
			if got := out.Choices[0].Message.Content; got != tc.content {
				t.Errorf("content %q, want %q", got, tc.content)
			}
		})
	}
	r := s.post(t, chatPath, keyAll, `{"model":"builtin/echo","response_format":{"type":"json_schema","json_schema":{"name":"weather_1","description":"d","schema":{"type":"object"},"strict":true}},`+hi+`}`)
	e := wantError(t, r, http.StatusBadRequest, "invalid_request", "invalid_request_error", "")
	if msg, _ := e["message"].(string); !strings.Contains(msg, "cannot follow a JSON schema") {
		t.Errorf("message %q", msg)
	}
}

// reasoning_effort reaches a vLLM model's completion and, for a key with a
// TPD limit, its prompt count, which /tokenize makes with the template
// arguments the completion gets from it (docs/engines.md): the count the
// limits reserve is the completion's prompt_tokens. Without it neither
// carries one.
func TestReasoningEffortReachesTheEngine(t *testing.T) {
	fake := vllmfake.Start(t, vllmfake.Model{ID: "org/thinker", Reasoning: true})
	eng, err := vllm.New(vllm.Config{Namespace: "gpu", URL: fake.URL})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	s := newStack(t, stackConfig{limits: startLimits(t), engines: []inference.Engine{eng}})
	for i, tc := range []struct{ effort, completion, tokenize string }{
		// A plain reply is asked of the server whole (stream false).
		{`,"reasoning_effort":"high"`, `"reasoning_effort":"high","stream":false`, `"chat_template_kwargs":{"enable_thinking":true,"reasoning_effort":"high"},`},
		{`,"reasoning_effort":"none"`, `"reasoning_effort":"none","stream":false`, `"chat_template_kwargs":{"enable_thinking":false,"reasoning_effort":"none"},`},
		{``, `"max_tokens":4096,"stream":false`, `"content":"hi"}],"add_generation_prompt"`},
	} {
		body := wantOK(t, s.post(t, chatPath, keyDay, `{"model":"gpu/org/thinker",`+hi+tc.effort+`}`))
		var out struct {
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatal(err)
		}
		chat, tok := string(fake.Requests(chatPath)[i]), string(fake.Requests("/tokenize")[i])
		if !strings.Contains(chat, tc.completion) {
			t.Errorf("%q: the completion was sent %s", tc.effort, chat)
		}
		if !strings.Contains(tok, tc.tokenize) {
			t.Errorf("%q: /tokenize was sent %s", tc.effort, tok)
		}
		var counted struct {
			Messages           []json.RawMessage `json:"messages"`
			ChatTemplateKwargs map[string]any    `json:"chat_template_kwargs"`
		}
		if err := json.Unmarshal([]byte(tok), &counted); err != nil {
			t.Fatal(err)
		}
		ids, _ := vllmfake.Tokenize(vllmfake.Template(counted.Messages, nil, true, counted.ChatTemplateKwargs))
		if len(ids) != out.Usage.PromptTokens {
			t.Errorf("%q: counted %d prompt tokens, the completion has %d", tc.effort, len(ids), out.Usage.PromptTokens)
		}
	}
}

// manyBiases is n logit_bias members, tokens 0 to n-1.
func manyBiases(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = `"` + strconv.Itoa(i) + `":1`
	}
	return strings.Join(parts, ",")
}
