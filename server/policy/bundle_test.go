package policy

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
)

// TestDefaultBundle covers the example rule of examples/policy.
func TestDefaultBundle(t *testing.T) {
	e := load(t, defaultBundle)
	ci := key("ci", nil, "tool:*")
	tests := []struct {
		name   string
		in     Input
		allow  bool
		reason string
	}{
		{name: "ci key without tools", in: chat(ci, unset), allow: true, reason: "allowed"},
		{name: "ci key offering a tool", in: chat(ci, auto, "get_weather"), reason: "keys labelled ci may not use tools"},
		{name: "ci key, tool_choice none", in: chat(ci, none, "get_weather"), reason: "keys labelled ci may not use tools"},
		{name: "other label offering a tool", in: chat(key("cli", nil, "tool:*"), auto, "get_weather"), allow: true, reason: "allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decide(t, e, tt.in)
			if d.Allow != tt.allow || d.Reason != tt.reason {
				t.Fatalf("decision = %+v, want allow=%v reason=%q", d, tt.allow, tt.reason)
			}
			if !d.Allow && d.DeniedBy != DeniedByBundle {
				t.Fatalf("denied_by = %q, want bundle", d.DeniedBy)
			}
		})
	}
}

// TestDefaultBundleInputVersion: the default bundle refuses an input
// document of a version it was not written for.
func TestDefaultBundleInputVersion(t *testing.T) {
	b := load(t, defaultBundle).Active()
	for _, tt := range []struct {
		version int
		allow   bool
		reason  string
	}{
		{1, true, "allowed"},
		{2, false, "the policy bundle does not understand input version 2"},
	} {
		in := chat(key("app", nil, "tool:*"), auto, "get_weather")
		doc := in.toAST(keyTerm(in.Key), in.Request.effectiveToolChoice(), in.Time).(ast.Object)
		doc.Insert(ast.StringTerm("version"), ast.IntNumberTerm(tt.version))
		out, err := b.eval(context.Background(), doc)
		if err != nil {
			t.Fatal(err)
		}
		if out.allow != tt.allow || out.reason != tt.reason {
			t.Fatalf("version %d: %+v, want allow=%v reason=%q", tt.version, out, tt.allow, tt.reason)
		}
	}
}

// narrowingRego exposes only tools starting with get_ and denies model
// builtin/secret.
const narrowingRego = `package tollgate.gateway

deny contains "model builtin/secret is reserved" if input.request.model == "builtin/secret"

decision := {"allow": false, "reason": concat("; ", sort(deny))} if {
	count(deny) > 0
} else := {
	"allow": true,
	"reason": "read-only tools",
	"tools": [t | some t in input.request.tools; startswith(t, "get_")],
}
`

// TestBundleNarrowsAndDenies: a bundle may remove tools (tool_choice must
// still be satisfiable afterwards) and deny models the key allows.
func TestBundleNarrowsAndDenies(t *testing.T) {
	e := load(t, regoBundle(t, "narrow-1", narrowingRego))
	star := key("app", nil, "tool:*")
	secret := chat(star, unset)
	secret.Request.Model = "builtin/secret"
	tests := []struct {
		name        string
		in          Input
		allow       bool
		deniedBy    DeniedBy
		tools       []string
		deniedTools []string
		narrowed    bool
		reason      string
	}{
		{name: "nothing to narrow", in: chat(star, auto, "get_a", "get_b"), allow: true, tools: []string{"get_a", "get_b"}, reason: "read-only tools"},
		{name: "narrowed", in: chat(star, auto, "get_a", "put_b", "get_c"), allow: true, tools: []string{"get_a", "get_c"}, deniedTools: []string{"put_b"}, narrowed: true},
		{name: "narrowed to nothing, auto", in: chat(star, auto, "put_b"), allow: true, deniedTools: []string{"put_b"}, narrowed: true},
		{name: "narrowed to nothing, none", in: chat(star, none, "put_b"), allow: true, deniedTools: []string{"put_b"}, narrowed: true},
		{
			name: "narrowed to nothing, required", in: chat(star, required, "put_b"),
			deniedBy: DeniedByBundle, deniedTools: []string{"put_b"}, reason: "exposes none",
		},
		{name: "narrowed, required still satisfiable", in: chat(star, required, "put_b", "get_a"), allow: true, tools: []string{"get_a"}, deniedTools: []string{"put_b"}, narrowed: true},
		{name: "named tool kept", in: chat(star, named("get_a"), "put_b", "get_a"), allow: true, tools: []string{"get_a"}, deniedTools: []string{"put_b"}, narrowed: true},
		{
			name: "named tool removed by the bundle", in: chat(star, named("put_b"), "put_b", "get_a"),
			deniedBy: DeniedByBundle, deniedTools: []string{"put_b"}, reason: `tool_choice names tool "put_b", which the policy bundle does not expose`,
		},
		{name: "model denied by the bundle", in: secret, deniedBy: DeniedByBundle, reason: "model builtin/secret is reserved"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decide(t, e, tt.in)
			if d.Allow != tt.allow || d.DeniedBy != tt.deniedBy || d.Narrowed != tt.narrowed {
				t.Fatalf("decision = %+v, want allow=%v denied_by=%q narrowed=%v", d, tt.allow, tt.deniedBy, tt.narrowed)
			}
			if !slices.Equal(d.AllowedTools, tt.tools) || !slices.Equal(d.DeniedTools, tt.deniedTools) {
				t.Fatalf("tools = %v / denied %v, want %v / %v", d.AllowedTools, d.DeniedTools, tt.tools, tt.deniedTools)
			}
			if !strings.Contains(d.Reason, tt.reason) {
				t.Fatalf("reason %q does not contain %q", d.Reason, tt.reason)
			}
			for _, tool := range tt.in.Request.Tools {
				if d.Exposes(tool) != slices.Contains(tt.tools, tool) {
					t.Errorf("Exposes(%q) = %v", tool, d.Exposes(tool))
				}
			}
		})
	}
}

// TestBundleOutputs: undefined, malformed and reasonless decisions deny
// (fail closed); a bundle cannot widen the tools offered.
func TestBundleOutputs(t *testing.T) {
	tests := []struct {
		name   string
		rego   string
		allow  bool
		tools  []string
		reason string
	}{
		{name: "undefined", reason: "made no decision"},
		{name: "not an object", rego: `decision := true`, reason: "malformed decision: decision is a boolean, not an object"},
		{name: "no allow", rego: `decision := {"reason": "x"}`, reason: "malformed decision: decision has no allow field"},
		{name: "allow not boolean", rego: `decision := {"allow": "yes"}`, reason: "decision.allow is not a boolean"},
		{name: "reason not a string", rego: `decision := {"allow": true, "reason": 1}`, reason: "decision.reason is not a string"},
		{name: "tools not strings", rego: `decision := {"allow": true, "tools": [1]}`, reason: "decision.tools is not"},
		{name: "deny without reason", rego: `decision := {"allow": false}`, reason: "denied by the policy bundle"},
		{name: "tools as a set, cannot widen", rego: `decision := {"allow": true, "tools": {"get_a", "extra"}}`, allow: true, tools: []string{"get_a"}, reason: "allowed"},
	}
	in := chat(key("app", nil, "tool:*"), auto, "get_a")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A bundle whose decision is malformed for the sample request
			// is refused at load (smoke test), so these misbehave only for
			// label "app"; "undefined" decides for the sample key alone.
			rego := "package tollgate.gateway\n\ndecision := {\"allow\": true} if input.key.label != \"app\"\n\n" +
				tt.rego + ` if input.key.label == "app"` + "\n"
			if tt.name == "undefined" {
				rego = "package tollgate.gateway\n\ndecision := {\"allow\": true} if input.key.label == \"sample\"\n"
			}
			e := load(t, regoBundle(t, "out", rego))
			d := decide(t, e, in)
			if d.Allow != tt.allow || !slices.Equal(d.AllowedTools, tt.tools) || !strings.Contains(d.Reason, tt.reason) {
				t.Fatalf("decision = %+v, want allow=%v tools=%v reason~%q", d, tt.allow, tt.tools, tt.reason)
			}
			if !d.Allow && d.DeniedBy != DeniedByBundle {
				t.Fatalf("denied_by = %q", d.DeniedBy)
			}
		})
	}
}

// TestInputDocument pins input document version 1 (docs/policy.md): a
// bundle hands the input back as its reason.
func TestInputDocument(t *testing.T) {
	e := load(t, regoBundle(t, "echo-input", "package tollgate.gateway\n\ndecision := {\"allow\": true, \"reason\": json.marshal(input)}\n"))
	temp, maxTokens, effort := 0.5, int64(100), "xhigh"
	in := chat(key("app", []string{"x/b", "x/a"}, "tool:get_weather"), named("get_weather"), "get_weather")
	in.Request.Stream = true
	in.Request.Temperature = &temp
	in.Request.MaxTokens = &maxTokens
	in.Request.ReasoningEffort = &effort
	in.Time = time.Date(2026, 11, 23, 9, 30, 0, 5, time.FixedZone("CET", 3600))
	in.Key.Models["builtin/echo"] = struct{}{}

	want := map[string]any{
		"version":      1.0,
		"appliance_id": "app_test",
		"time":         "2026-11-23T08:30:00.000000005Z",
		"time_ns":      float64(in.Time.UnixNano()),
		"key": map[string]any{
			"tenant_id": "acme", "key_id": "key_test1", "label": "app",
			"scopes": []any{"tool:get_weather"}, "all_models": false,
			"models": []any{"builtin/echo", "x/a", "x/b"},
		},
		"request": map[string]any{
			"id": "req_test1", "endpoint": "/v1/chat/completions", "model": "builtin/echo",
			"stream": true, "tools": []any{"get_weather"},
			"tool_choice":   map[string]any{"mode": "function", "name": "get_weather"},
			"message_count": 2.0, "temperature": 0.5, "max_tokens": 100.0,
			"reasoning_effort": "xhigh",
		},
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(decide(t, e, in).Reason), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("input document\n got %v\nwant %v", got, want)
	}

	// Optional fields are absent when not sent; an unset tool_choice is
	// resolved to OpenAI's default.
	for _, tc := range []struct {
		tools []string
		mode  string
	}{{nil, "none"}, {[]string{"get_weather"}, "auto"}} {
		in := chat(key("app", nil, "tool:*"), unset, tc.tools...)
		if err := json.Unmarshal([]byte(decide(t, e, in).Reason), &got); err != nil {
			t.Fatal(err)
		}
		req := got["request"].(map[string]any)
		if _, ok := req["temperature"]; ok {
			t.Errorf("temperature present: %v", req)
		}
		if _, ok := req["max_tokens"]; ok {
			t.Errorf("max_tokens present: %v", req)
		}
		if _, ok := req["reasoning_effort"]; ok {
			t.Errorf("reasoning_effort present: %v", req)
		}
		if mode := req["tool_choice"].(map[string]any)["mode"]; mode != tc.mode {
			t.Errorf("tool_choice mode = %v, want %s", mode, tc.mode)
		}
		if models := got["key"].(map[string]any)["models"].([]any); len(models) != 0 {
			t.Errorf("models = %v for an all-models key", models)
		}
	}
}

// effortRego refuses the two largest reasoning efforts and reports the
// effort it decided on, "unset" for a request without one.
const effortRego = `package tollgate.gateway

effort := object.get(input.request, "reasoning_effort", "unset")

deny contains sprintf("reasoning_effort %s is not allowed", [effort]) if effort in {"xhigh", "max"}

decision := {"allow": false, "reason": concat("; ", sort(deny))} if {
	count(deny) > 0
} else := {"allow": true, "reason": sprintf("effort %s", [effort])}
`

// TestBundleReasoningEffort: a bundle decides on
// input.request.reasoning_effort, which is absent (object.get's default
// applies) when the client sent none.
func TestBundleReasoningEffort(t *testing.T) {
	e := load(t, regoBundle(t, "effort-1", effortRego))
	for _, tt := range []struct {
		effort string // "" for none sent
		allow  bool
		reason string
	}{
		{"xhigh", false, "reasoning_effort xhigh is not allowed"},
		{"max", false, "reasoning_effort max is not allowed"},
		{"high", true, "effort high"},
		{"low", true, "effort low"},
		{"", true, "effort unset"},
	} {
		in := chat(key("app", nil, "tool:*"), auto, "get_weather")
		if tt.effort != "" {
			in.Request.ReasoningEffort = &tt.effort
		}
		d := decide(t, e, in)
		if d.Allow != tt.allow || d.Reason != tt.reason {
			t.Errorf("effort %q: decision %+v, want allow=%v reason=%q", tt.effort, d, tt.allow, tt.reason)
		}
		if !tt.allow && (d.DeniedBy != DeniedByBundle || len(d.AllowedTools) != 0) {
			t.Errorf("effort %q: denied_by %q, allowed tools %v", tt.effort, d.DeniedBy, d.AllowedTools)
		}
	}
}
