package edge_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/server/keys"
)

// keyShort is a key whose replies have at most two tokens.
const keyShort = "tgk_test_short"

// A key's maximum reply length cuts every endpoint's reply as max_tokens
// does, whatever the request asks: finish_reason length for chat and
// completions, streamed or not, and an incomplete response
// (max_output_tokens) for the Responses API.
func TestKeyMaximumCutsEveryEndpoint(t *testing.T) {
	auth := testAuth()
	short := keys.NewPrincipal("ten_test", "key_short", "key_short", true, nil, 0, 0, nil, time.Time{})
	short.MaxOutputTokens = 2
	auth[keyShort] = short
	s := newStack(t, stackConfig{auth: auth, local: true})
	const text = `"hello big wide world"`
	for _, tc := range []struct{ name, path, body, want string }{
		{"chat", chatPath, `{"model":"builtin/echo","messages":[{"role":"user","content":` + text + `}]}`,
			`"message":{"role":"assistant","content":"hello big"`},
		{"chat asking for more", chatPath, `{"model":"builtin/echo","max_tokens":100,"messages":[{"role":"user","content":` + text + `}]}`,
			`"finish_reason":"length"`},
		{"chat streamed", chatPath, `{"model":"builtin/echo","stream":true,"messages":[{"role":"user","content":` + text + `}]}`,
			`"finish_reason":"length"`},
		{"completion", completionsPath, `{"model":"builtin/echo","prompt":` + text + `}`,
			`"text":"hello big","index":0,"logprobs":null,"finish_reason":"length"`},
		{"completion of several prompts", completionsPath, `{"model":"builtin/echo","max_tokens":100,"prompt":[` + text + `,"one two three four"]}`,
			`"text":"hello big","index":0,"logprobs":null,"finish_reason":"length"},{"text":"one two","index":1,"logprobs":null,"finish_reason":"length"`},
		{"response", "/v1/responses", `{"model":"builtin/echo","store":false,"input":` + text + `,"max_output_tokens":50}`,
			`"incomplete_details":{"reason":"max_output_tokens"}`},
		{"response streamed", "/v1/responses", `{"model":"builtin/echo","store":false,"stream":true,"input":` + text + `}`,
			`"incomplete_details":{"reason":"max_output_tokens"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.post(t, tc.path, keyShort, tc.body)
			if r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if !strings.Contains(string(r.body), tc.want) {
				t.Errorf("body lacks %s:\n%s", tc.want, r.body)
			}
			if strings.Contains(string(r.body), "wide") {
				t.Errorf("a reply past the key's maximum:\n%s", r.body)
			}
			if strings.HasPrefix(tc.path, "/v1/responses") && !strings.Contains(tc.body, `"stream":true`) {
				var m struct {
					Status string `json:"status"`
				}
				if err := json.Unmarshal(r.body, &m); err != nil || m.Status != "incomplete" {
					t.Errorf("status %q (%v)", m.Status, err)
				}
			}
		})
	}
}
