package edge_test

import (
	"net/http"
	"strings"
	"testing"
)

// Field names are matched exactly, at every level of a request, as
// OpenAI's API does: a key that differs from a known field only in case is
// an unknown field and is ignored. Were it folded onto the known field (as
// encoding/json v1 does), a proxy or WAF in front of the gateway would see
// one model, stream flag or tool set and the gateway would act on another.
func TestFieldNamesAreCaseSensitive(t *testing.T) {
	const toolCall = `{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{}"}}`
	refused := []struct {
		name, path, body, param string
	}{
		// The folded key does not override the exact one...
		{"Model after model", chatPath, `{"model":"builtin/nope","Model":"builtin/echo",` + hi + `}`, ""},
		{"MODEL before model", chatPath, `{"MODEL":"builtin/echo","model":"builtin/nope",` + hi + `}`, ""},
		// ...nor stands in for a missing one.
		{"Model alone", chatPath, `{"Model":"builtin/echo",` + hi + `}`, "model"},
		{"Messages", chatPath, `{"model":"builtin/echo","Messages":[{"role":"user","content":"hi"}]}`, "messages"},
		{"messages: Role", chatPath, `{"model":"builtin/echo","messages":[{"Role":"user","content":"hi"}]}`, "messages[0].role"},
		{"messages: Content", chatPath, `{"model":"builtin/echo","messages":[{"role":"user","Content":"hi"}]}`, "messages[0].content"},
		{"messages: Tool_Call_Id", chatPath, `{"model":"builtin/echo","messages":[{"role":"tool","content":"x","Tool_Call_Id":"c1"}]}`, "messages[0].tool_call_id"},
		{"content part: Text", chatPath, `{"model":"builtin/echo","messages":[{"role":"user","content":[{"type":"text","Text":"hi"}]}]}`, "messages[0].content[0].text"},
		{"content part: TYPE", chatPath, `{"model":"builtin/echo","messages":[{"role":"user","content":[{"TYPE":"text","text":"hi"}]}]}`, "messages[0].content[0].type"},
		{"tool call: Function", chatPath, `{"model":"builtin/echo","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","Function":{"name":"f","arguments":"{}"}}]}]}`, "messages[0].tool_calls[0].function.name"},
		{"tool call: Name", chatPath, `{"model":"builtin/echo","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"Name":"f","arguments":"{}"}}]}]}`, "messages[0].tool_calls[0].function.name"},
		{"Tools", chatPath, `{"model":"builtin/echo","Tools":[{"type":"function","function":{"name":"get_weather"}}],"tool_choice":"required",` + hi + `}`, "tool_choice"},
		{"tools: Type", chatPath, `{"model":"builtin/echo","tools":[{"Type":"function","function":{"name":"get_weather"}}],` + hi + `}`, "tools[0].type"},
		{"tools: Function", chatPath, `{"model":"builtin/echo","tools":[{"type":"function","Function":{"name":"get_weather"}}],` + hi + `}`, "tools[0].function.name"},
		{"tools: Name", chatPath, `{"model":"builtin/echo","tools":[{"type":"function","function":{"NAME":"get_weather"}}],` + hi + `}`, "tools[0].function.name"},
		{"tool_choice: Type", chatPath, `{"model":"builtin/echo",` + weatherTool + `,"tool_choice":{"Type":"function","function":{"name":"get_weather"}},` + hi + `}`, "tool_choice"},
		{"tool_choice: Function", chatPath, `{"model":"builtin/echo",` + weatherTool + `,"tool_choice":{"type":"function","Function":{"name":"get_weather"}},` + hi + `}`, "tool_choice"},
		{"tool_choice: Name", chatPath, `{"model":"builtin/echo",` + weatherTool + `,"tool_choice":{"type":"function","function":{"Name":"get_weather"}},` + hi + `}`, "tool_choice"},
		{"embeddings: Model", embedPath, `{"Model":"builtin/embed","input":"x"}`, "model"},
		{"embeddings: Model after model", embedPath, `{"model":"builtin/nope","Model":"builtin/embed","input":"x"}`, ""},
		{"embeddings: Input", embedPath, `{"model":"builtin/embed","Input":"x"}`, "input"},
	}
	// plain: a 200 for anything but a stream is a plain JSON reply.
	plain := func(t *testing.T, r response) {
		if ct := r.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q, want a plain reply", ct)
		}
	}
	accepted := []struct {
		name, path, body string
		check            func(t *testing.T, r response)
	}{
		{"STREAM is not stream", chatPath, `{"model":"builtin/echo","STREAM":true,` + hi + `}`, plain},
		{"Stream_Options is not stream_options", chatPath, `{"model":"builtin/echo","Stream_Options":{"include_usage":true},` + hi + `}`, plain},
		{"stream_options: Include_Usage", chatPath, `{"model":"builtin/echo","stream":true,"stream_options":{"Include_Usage":true},` + hi + `}`, func(t *testing.T, r response) {
			if ct := r.header.Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("Content-Type %q, want a stream", ct)
			}
			if strings.Contains(string(r.body), `"usage"`) {
				t.Errorf("usage sent for Include_Usage: %s", r.body)
			}
		}},
		{"Max_Tokens is not max_tokens", chatPath, `{"model":"builtin/echo","Max_Tokens":0,` + hi + `}`, plain},
		{"Temperature is not temperature", chatPath, `{"model":"builtin/echo","Temperature":9,` + hi + `}`, plain},
		{"N is not n", chatPath, `{"model":"builtin/echo","N":3,` + hi + `}`, plain},
		{"Stop is not stop", chatPath, `{"model":"builtin/echo","Stop":5,` + hi + `}`, plain},
		{"Tool_Choice is not tool_choice", chatPath, `{"model":"builtin/echo","Tool_Choice":"required",` + hi + `}`, plain},
		{"Tool_Calls is not tool_calls", chatPath, `{"model":"builtin/echo","messages":[{"role":"user","content":"hi","Tool_Calls":[` + toolCall + `]}]}`, plain},
		{"Tools with a bad tool is not tools", chatPath, `{"model":"builtin/echo","TOOLS":[{"type":"retrieval"}],` + hi + `}`, plain},
		{"embeddings: Encoding_Format", embedPath, `{"model":"builtin/embed","input":"x","Encoding_Format":"int8"}`, plain},
		{"embeddings: Dimensions", embedPath, `{"model":"builtin/embed","input":"x","Dimensions":0}`, plain},
	}
	s := newStack(t, stackConfig{})
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			r := s.post(t, tc.path, keyAll, tc.body)
			if tc.param == "" {
				// The exact key names a model that is not loaded.
				wantError(t, r, http.StatusServiceUnavailable, "model_unavailable", "server_error", "")
				return
			}
			wantError(t, r, http.StatusBadRequest, "invalid_request", "invalid_request_error", tc.param)
		})
	}
	for _, tc := range accepted {
		t.Run(tc.name, func(t *testing.T) {
			r := s.post(t, tc.path, keyAll, tc.body)
			if r.status != http.StatusOK {
				t.Fatalf("status %d, body %s", r.status, r.body)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}
