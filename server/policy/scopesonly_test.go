package policy

import (
	"context"
	"slices"
	"testing"
)

// TestScopesOnly: the key's stage alone, as Engine.Decide runs it before a
// bundle: the same denials, and an allow exposing every offered tool.
func TestScopesOnly(t *testing.T) {
	for _, c := range []struct {
		name     string
		in       Input
		allow    bool
		by       DeniedBy
		exposed  []string
		rejected []string
	}{
		{"covered tools", chat(key("k", nil, "tool:get_weather", "tool:search"), ToolChoice{Mode: ToolChoiceAuto}, "get_weather", "search"), true, DeniedByNone, []string{"get_weather", "search"}, nil},
		{"tool:* covers all", chat(key("k", nil, ScopeAllTools), ToolChoice{Mode: ToolChoiceRequired}, "anything"), true, DeniedByNone, []string{"anything"}, nil},
		{"no tools", chat(key("k", nil), ToolChoice{}), true, DeniedByNone, nil, nil},
		{"model not allowed", chat(key("k", []string{"vllm/other"}), ToolChoice{}), false, DeniedByModel, nil, nil},
		{"uncovered tool", chat(key("k", nil, "tool:get_weather"), ToolChoice{Mode: ToolChoiceAuto}, "get_weather", "delete_files"), false, DeniedByToolScope, nil, []string{"delete_files"}},
		{"required without tools", chat(key("k", nil), ToolChoice{Mode: ToolChoiceRequired}), false, DeniedByToolChoice, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := ScopesOnly{}.Decide(context.Background(), c.in)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allow != c.allow || d.DeniedBy != c.by || !slices.Equal(d.AllowedTools, c.exposed) || !slices.Equal(d.DeniedTools, c.rejected) {
				t.Fatalf("decision %+v, want allow %t by %q exposing %v denying %v", d, c.allow, c.by, c.exposed, c.rejected)
			}
			if d.Reason == "" || d.Narrowed || d.ID != "" {
				t.Fatalf("decision %+v: want a reason, not narrowed, no ID", d)
			}
			for _, tool := range c.exposed {
				if !d.Exposes(tool) {
					t.Errorf("does not expose %q", tool)
				}
			}
		})
	}
	if _, err := (ScopesOnly{}).Decide(context.Background(), Input{}); err == nil {
		t.Fatal("Decide without a key succeeded")
	}
}
