package policy

import (
	"slices"
	"strings"
	"testing"
)

var (
	auto     = ToolChoice{Mode: ToolChoiceAuto}
	none     = ToolChoice{Mode: ToolChoiceNone}
	required = ToolChoice{Mode: ToolChoiceRequired}
	unset    = ToolChoice{}
)

func named(n string) ToolChoice { return ToolChoice{Mode: ToolChoiceFunction, Name: n} }

// TestScopes covers the checks made in Go before any bundle: tool scope
// coverage, missing and extra tools, every tool_choice variant and models.
// It runs on the default bundle, which allows whatever passes them.
func TestScopes(t *testing.T) {
	e := load(t, defaultBundle)
	weather := key("app", nil, "tool:get_weather")
	two := key("app", nil, "tool:get_weather", "tool:get_time")
	star := key("app", nil, "tool:*")
	noTools := key("app", nil)
	echoOnly := key("app", []string{"builtin/echo"}, "tool:*")
	embedOnly := key("app", []string{"builtin/embed"}, "tool:*")

	tests := []struct {
		name        string
		in          Input
		allow       bool
		deniedBy    DeniedBy
		tools       []string // AllowedTools when allowed
		deniedTools []string
		reason      string // substring of the reason on a denial
	}{
		{name: "no tools, no scopes", in: chat(noTools, unset), allow: true},
		{name: "tool covered by its scope", in: chat(weather, unset, "get_weather"), allow: true, tools: []string{"get_weather"}},
		{name: "every tool covered", in: chat(two, auto, "get_time", "get_weather"), allow: true, tools: []string{"get_time", "get_weather"}},
		{name: "tool:* covers any tool", in: chat(star, auto, "rm_rf", "get_weather"), allow: true, tools: []string{"rm_rf", "get_weather"}},
		{name: "scope for a tool not offered is fine", in: chat(two, auto, "get_time"), allow: true, tools: []string{"get_time"}},
		{
			name: "extra tool outside scope", in: chat(weather, auto, "get_weather", "delete_repo"),
			deniedBy: DeniedByToolScope, deniedTools: []string{"delete_repo"}, reason: `tool "delete_repo" is not covered`,
		},
		{
			name: "several tools outside scope, listed once each", in: chat(weather, auto, "a", "get_weather", "b", "a"),
			deniedBy: DeniedByToolScope, deniedTools: []string{"a", "b"}, reason: `tools "a", "b" are not covered`,
		},
		{
			name: "key without tool scopes offers a tool", in: chat(noTools, unset, "get_weather"),
			deniedBy: DeniedByToolScope, deniedTools: []string{"get_weather"},
		},
		{
			name: "scope is exact, not a prefix", in: chat(weather, auto, "get_weather_now"),
			deniedBy: DeniedByToolScope, deniedTools: []string{"get_weather_now"},
		},
		{
			name: "tool_choice none still needs every offered tool in scope", in: chat(weather, none, "get_weather", "delete_repo"),
			deniedBy: DeniedByToolScope, deniedTools: []string{"delete_repo"},
		},
		{name: "tool_choice none with covered tools", in: chat(weather, none, "get_weather"), allow: true, tools: []string{"get_weather"}},
		{name: "tool_choice auto with covered tools", in: chat(weather, auto, "get_weather"), allow: true, tools: []string{"get_weather"}},
		{name: "tool_choice required with covered tools", in: chat(weather, required, "get_weather"), allow: true, tools: []string{"get_weather"}},
		{
			name: "tool_choice required without tools", in: chat(weather, required),
			deniedBy: DeniedByToolChoice, reason: "required",
		},
		{
			name: "tool_choice required with an out-of-scope tool", in: chat(weather, required, "delete_repo"),
			deniedBy: DeniedByToolScope, deniedTools: []string{"delete_repo"},
		},
		{name: "named tool in scope and offered", in: chat(two, named("get_time"), "get_weather", "get_time"), allow: true, tools: []string{"get_weather", "get_time"}},
		{name: "named tool covered by tool:*", in: chat(star, named("x"), "x"), allow: true, tools: []string{"x"}},
		{
			name: "named tool outside scope", in: chat(weather, named("delete_repo"), "get_weather"),
			deniedBy: DeniedByToolScope, deniedTools: []string{"delete_repo"}, reason: `tool_choice names tool "delete_repo", which is not covered`,
		},
		{
			name: "named tool in scope but not offered", in: chat(two, named("get_time"), "get_weather"),
			deniedBy: DeniedByToolChoice, reason: "does not offer",
		},
		{name: "named tool without a name", in: chat(two, named(""), "get_weather"), deniedBy: DeniedByToolChoice},
		{name: "model allowed by the key", in: chat(echoOnly, unset), allow: true},
		{
			name: "model not allowed by the key", in: chat(embedOnly, unset, "get_weather"),
			deniedBy: DeniedByModel, reason: `model "builtin/echo" is not allowed`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decide(t, e, tt.in)
			if d.Allow != tt.allow || d.DeniedBy != tt.deniedBy {
				t.Fatalf("allow=%v denied_by=%q (%s), want allow=%v denied_by=%q", d.Allow, d.DeniedBy, d.Reason, tt.allow, tt.deniedBy)
			}
			if !slices.Equal(d.AllowedTools, tt.tools) {
				t.Errorf("allowed tools = %v, want %v", d.AllowedTools, tt.tools)
			}
			if !slices.Equal(d.DeniedTools, tt.deniedTools) {
				t.Errorf("denied tools = %v, want %v", d.DeniedTools, tt.deniedTools)
			}
			if !strings.Contains(d.Reason, tt.reason) {
				t.Errorf("reason %q does not contain %q", d.Reason, tt.reason)
			}
			if d.BundleRevision != "tollgate-default-2" || !strings.HasPrefix(d.BundleDigest, "sha256:") {
				t.Errorf("bundle = %q %q", d.BundleRevision, d.BundleDigest)
			}
			for _, tool := range tt.in.Request.Tools {
				if d.Exposes(tool) != slices.Contains(tt.tools, tool) {
					t.Errorf("Exposes(%q) = %v", tool, d.Exposes(tool))
				}
			}
		})
	}
}

// TestCustomBundleCannotDropScopes: a bundle that allows everything still
// gets no request past the scope check.
func TestCustomBundleCannotDropScopes(t *testing.T) {
	e := load(t, regoBundle(t, "allow-all", "package tollgate.gateway\n\ndecision := {\"allow\": true}\n"))
	d := decide(t, e, chat(key("app", nil, "tool:get_weather"), auto, "delete_repo"))
	if d.Allow || d.DeniedBy != DeniedByToolScope {
		t.Fatalf("decision = %+v, want a tool scope denial", d)
	}
	d = decide(t, e, chat(key("app", nil, "tool:get_weather"), auto, "get_weather"))
	if !d.Allow || d.Reason != "allowed" || d.BundleRevision != "allow-all" {
		t.Fatalf("decision = %+v", d)
	}
}

func TestDecisionIDsAreUnique(t *testing.T) {
	e := load(t, defaultBundle)
	seen := map[string]bool{}
	for range 1000 {
		d := decide(t, e, chat(key("app", nil), unset))
		if seen[d.ID] {
			t.Fatalf("decision id %s repeated", d.ID)
		}
		seen[d.ID] = true
	}
}

func TestDecideWithoutKey(t *testing.T) {
	e := load(t, defaultBundle)
	if _, err := e.Decide(t.Context(), Input{}); err == nil {
		t.Fatal("Decide without a key succeeded")
	}
}
