package edge

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tollgate-dev/tollgate/internal/openai"
)

// validModelID is the inference proto's model pattern, written out by hand.
func TestValidModelIDMatchesProtoPattern(t *testing.T) {
	proto := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}/[A-Za-z0-9][A-Za-z0-9._:/-]{0,191}$`)
	ids := []string{
		"builtin/echo", "a/b", "Acme-1.x_y/llama:3.1/q4", "echo", "/echo", "builtin/", "builtin//echo",
		"-x/echo", "x/-echo", "x/.echo", "x_/e.c_h-o:1", "x y/echo", "x/ec ho", "x/echo\n", "é/echo", "x/é",
		"x:y/echo", "x/echo/", strings.Repeat("a", 64) + "/m", strings.Repeat("a", 65) + "/m",
		"a/" + strings.Repeat("m", 192), "a/" + strings.Repeat("m", 193), "",
	}
	for _, id := range ids {
		if got, want := validModelID(id), proto.MatchString(id); got != want {
			t.Errorf("validModelID(%q) = %v, the proto pattern says %v", id, got, want)
		}
	}
}

// jsonString decodes like encoding/json, fast path or not.
func TestJSONString(t *testing.T) {
	for _, raw := range []string{`""`, `"plain text"`, `"<&>"`, `"esc \" \\ \n \u00e9 \ud83d\ude42"`, "\"bad \xff utf8\"", `"日本語"`, `"a\/b"`} {
		var want string
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatal(err)
		}
		got, err := jsonString(jsontext.Value(raw))
		if err != nil || got != want {
			t.Errorf("jsonString(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
}

// pathAt names the value at fault, array indexes included.
func TestTypeErrorParam(t *testing.T) {
	tests := []struct{ body, param string }{
		{`{"model":1}`, "model"},
		{`{"model":"builtin/echo","stream":"yes"}`, "stream"},
		{`{"messages":[{"role":"user","content":"a"},{"role":7}]}`, "messages[1].role"},
		{`{"messages":[{"role":"user","content":"a"}, "x"]}`, "messages[1]"},
		{`{"messages":{"role":"user"}}`, "messages"},
		{`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f"}},{"function":{"name":3}}]}]}`, "messages[0].tool_calls[1].function.name"},
		{`{"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"g","strict":"yes"}}]}`, "tools[1].function.strict"},
		{`{"a":{"b":[1,{"c":[]}]},"temperature":"hot"}`, "temperature"},
		{`{"stream_options":{"include_usage":1}}`, "stream_options.include_usage"},
		{`{"max_tokens":1.5}`, "max_tokens"},
	}
	for _, tt := range tests {
		var in openai.ChatCompletionRequest
		e := decodeJSON([]byte(tt.body), &in)
		if e == nil || e.Param != tt.param || !strings.Contains(e.Message, tt.param) {
			t.Errorf("%s: error %+v, want param %q named in the message", tt.body, e, tt.param)
		}
	}
	var parts []openai.ContentPart
	if e := decodeJSONAt([]byte(`[{"type":"text","text":"a"},{"type":"text","text":5}]`), &parts, "messages[2].content"); e == nil || e.Param != "messages[2].content[1].text" {
		t.Errorf("content part: %+v", e)
	}
	var in openai.ChatCompletionRequest
	if e := decodeJSON([]byte(`[1,2]`), &in); e == nil || e.Param != "" {
		t.Errorf("array body: %+v", e)
	}
}

// reasoning_effort is passed on as sent, one of OpenAI's values; null is
// none, and anything else is refused naming the values.
func TestDecodeReasoningEffort(t *testing.T) {
	const msgs = `"model":"builtin/echo","messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		value string
		want  *string
	}{{``, nil}, {`,"reasoning_effort":null`, nil}, {`,"reasoning_effort":"xhigh"`, new("xhigh")}, {`,"reasoning_effort":"none"`, new("none")}} {
		call, e := decodeChat([]byte(`{`+msgs+tc.value+`}`), "req_1")
		if e != nil {
			t.Fatalf("%s: %+v", tc.value, e)
		}
		if got := call.req.ReasoningEffort; (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("%s: reasoning_effort %v, want %v", tc.value, got, tc.want)
		}
	}
	_, e := decodeChat([]byte(`{`+msgs+`,"reasoning_effort":"maximum"}`), "req_1")
	if want := `reasoning_effort "maximum" is not one of none, minimal, low, medium, high, xhigh, max`; e == nil || e.Param != "reasoning_effort" || e.Message != want {
		t.Errorf("maximum: %+v, want %q", e, want)
	}
}

// The decoding step alone, without the engine and the HTTP plumbing whose
// cost hides it in BenchmarkChatCompletion: the benchmark's request, and a
// longer conversation with content parts, tools and an earlier tool call.
func BenchmarkDecodeChat(b *testing.B) {
	bodies := []struct{ name, body string }{
		{"small", `{"model":"builtin/echo","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"hello big wide world of tokens"}],"temperature":0.2,"max_tokens":64}`},
		{"tools", `{"model":"builtin/echo","messages":[` +
			`{"role":"system","content":"You are a helpful assistant. Answer briefly and call a tool when one fits."},` +
			`{"role":"user","content":[{"type":"text","text":"What is the weather in Oslo?"},{"type":"text","text":"And in Bergen, please."}]},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},` +
			`{"role":"tool","tool_call_id":"call_1","content":"{\"temp_c\":4,\"sky\":\"overcast\"}"},` +
			`{"role":"user","content":"Thanks. Now Bergen."}],` +
			`"tools":[{"type":"function","function":{"name":"get_weather","description":"Current weather for a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},` +
			`{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"tz":{"type":"string"}}}}}],` +
			`"tool_choice":"auto","temperature":0.7,"top_p":0.9,"max_completion_tokens":256,"stream":true,"stream_options":{"include_usage":true},"user":"u-42"}`},
	}
	for _, tc := range bodies {
		b.Run(tc.name, func(b *testing.B) {
			body := []byte(tc.body)
			if _, err := decodeChat(body, "req_1"); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeChat(body, "req_1"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
