package edge_test

import (
	"net/http"
	"strings"
	"testing"
)

// A name given twice in one JSON object is refused at any depth, known
// field or not: parsers disagree on which value counts (the last, the
// first), so a proxy, the engine's own parser or an auditor reading the
// stored body could act on another value than the gateway did.
func TestDuplicateNamesAreRefused(t *testing.T) {
	cases := []struct {
		name, path, body, param string
	}{
		{"model", chatPath, `{"model":"builtin/nope","model":"builtin/echo",` + hi + `}`, "model"},
		{"stream", chatPath, `{"model":"builtin/echo","stream":false,"stream":true,` + hi + `}`, "stream"},
		{"messages", chatPath, `{"model":"builtin/echo","messages":[],"messages":[{"role":"user","content":"hi"}]}`, "messages"},
		{"messages: role", chatPath, `{"model":"builtin/echo","messages":[{"role":"user","content":"a"},{"role":"user","role":"system","content":"b"}]}`, "messages[1].role"},
		{"content part: text", chatPath, `{"model":"builtin/echo","messages":[{"role":"user","content":[{"type":"text","text":"a","text":"b"}]}]}`, "messages[0].content[0].text"},
		{"tools: function name", chatPath, `{"model":"builtin/echo","tools":[{"type":"function","function":{"name":"get_weather","name":"delete_repo"}}],` + hi + `}`, "tools[0].function.name"},
		{"tool parameters", chatPath, `{"model":"builtin/echo","tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","type":"string"}}}],` + hi + `}`, "tools[0].function.parameters.type"},
		{"tool_choice", chatPath, `{"model":"builtin/echo",` + weatherTool + `,"tool_choice":{"type":"function","function":{"name":"get_weather","name":"x"}},` + hi + `}`, "tool_choice.function.name"},
		{"logit_bias token", chatPath, `{"model":"builtin/echo","logit_bias":{"9":1,"9":-100},` + hi + `}`, "logit_bias.9"},
		{"unknown field in an array", chatPath, `{"model":"builtin/echo","extra":[{"a":1},{"a":1,"a":2}],` + hi + `}`, "extra[1].a"},
		{"unknown field", chatPath, `{"model":"builtin/echo","metadata":{"a":"1","a":"2"},` + hi + `}`, "metadata.a"},
		{"embeddings: input", embedPath, `{"model":"builtin/embed","input":"a","input":"b"}`, "input"},
	}
	s := newStack(t, stackConfig{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := s.post(t, tc.path, keyAll, tc.body)
			e := wantError(t, r, http.StatusBadRequest, "invalid_request", "invalid_request_error", tc.param)
			if msg, _ := e["message"].(string); !strings.Contains(msg, tc.param+" is given more than once") {
				t.Errorf("message %q does not name %s as given twice", msg, tc.param)
			}
		})
	}
	// The same names once each, or differing in case, are not duplicates.
	for _, body := range []string{
		`{"model":"builtin/echo","Model":"x",` + hi + `}`,
		`{"model":"builtin/echo","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`,
	} {
		if r := s.post(t, chatPath, keyAll, body); r.status != http.StatusOK {
			t.Errorf("%s: status %d, want 200; body %s", body, r.status, r.body)
		}
	}
}
