package edge_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/server/inference"
	"github.com/tollgate-dev/tollgate/server/inference/vllm"
	"github.com/tollgate-dev/tollgate/server/inference/vllm/vllmfake"
)

// A policy that removes every tool the client offered leaves the request
// allowed, with no tools (docs/policy.md), whatever tool_choice said of
// none or auto: on a vLLM model too, which refuses a tool_choice other
// than "none" sent without tools.
func TestNarrowedToNoTools(t *testing.T) {
	pol := loadBundle(t, `package tollgate.gateway

decision := {"allow": true, "reason": "no tools today", "tools": []}
`)
	fake := vllmfake.Start(t)
	eng, err := vllm.New(vllm.Config{Namespace: "gpu", URL: fake.URL})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	s := newStack(t, stackConfig{policy: pol, engines: []inference.Engine{eng}})
	for _, model := range []string{"builtin/echo", "gpu/meta-llama/Llama-3.1-8B-Instruct"} {
		for _, choice := range []string{"", `,"tool_choice":"auto"`, `,"tool_choice":"none"`} {
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s%s stream=%t", model, choice, stream), func(t *testing.T) {
					sent := len(fake.Requests("/v1/chat/completions"))
					r := s.post(t, chatPath, keyTool, fmt.Sprintf(`{"model":%q,"stream":%t,`+weatherTool+choice+
						`,"messages":[{"role":"user","content":"/tool get_weather {\"city\":\"Oslo\"}"}]}`, model, stream))
					if r.status != 200 {
						t.Fatalf("status %d: %s", r.status, r.body)
					}
					if strings.Contains(string(r.body), "tool_calls") {
						t.Errorf("a tool was called: %s", r.body)
					}
					if reqs := fake.Requests("/v1/chat/completions"); len(reqs) > sent {
						var body map[string]json.RawMessage
						if err := json.Unmarshal(reqs[len(reqs)-1], &body); err != nil {
							t.Fatal(err)
						}
						if body["tools"] != nil || body["tool_choice"] != nil {
							t.Errorf("the model server was sent tools %s, tool_choice %s", body["tools"], body["tool_choice"])
						}
					}
				})
			}
		}
	}
}
