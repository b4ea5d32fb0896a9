package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tollgate-dev/tollgate/server/keys"
)

// ScopeAllTools is the scope that covers every tool.
const ScopeAllTools = "tool:*"

// ToolScope returns the scope that covers tool name: tool:<name>.
func ToolScope(name string) string { return "tool:" + name }

// CoversTool reports whether key p may expose tool name: it holds
// tool:<name> or tool:*.
func CoversTool(p *keys.Principal, name string) bool {
	return p.HasScope(ScopeAllTools) || p.HasScope(ToolScope(name))
}

// denial is a refusal by one check.
type denial struct {
	by     DeniedBy
	reason string
	tools  []string
}

// checkKey is the stage that runs in Go before any bundle: the key must
// allow the model, and cover every offered tool and the tool tool_choice
// names; tool_choice must be satisfiable by the offered tools. It returns
// nil when the request passes.
func checkKey(in *Input, tc ToolChoice) *denial {
	p, r := in.Key, &in.Request
	if r.Model != "" && !p.AllowsModel(r.Model) {
		return &denial{by: DeniedByModel, reason: fmt.Sprintf("model %q is not allowed for this key", r.Model)}
	}
	var uncovered []string
	for _, t := range r.Tools {
		if !CoversTool(p, t) && !slices.Contains(uncovered, t) {
			uncovered = append(uncovered, t)
		}
	}
	if len(uncovered) > 0 {
		return &denial{by: DeniedByToolScope, reason: notCovered(uncovered), tools: uncovered}
	}
	return checkToolChoice(p, r.Tools, tc)
}

// checkToolChoice checks tc against the key's scopes and the tools that
// will be exposed.
func checkToolChoice(p *keys.Principal, tools []string, tc ToolChoice) *denial {
	switch tc.Mode {
	case ToolChoiceRequired:
		if len(tools) == 0 {
			return &denial{by: DeniedByToolChoice, reason: "tool_choice is required but the request offers no tools"}
		}
	case ToolChoiceFunction:
		switch {
		case tc.Name == "":
			return &denial{by: DeniedByToolChoice, reason: "tool_choice names no function"}
		case !CoversTool(p, tc.Name):
			return &denial{
				by:     DeniedByToolScope,
				reason: fmt.Sprintf("tool_choice names tool %q, which is not covered by the key's tool: scopes", tc.Name),
				tools:  []string{tc.Name},
			}
		case !slices.Contains(tools, tc.Name):
			return &denial{by: DeniedByToolChoice, reason: fmt.Sprintf("tool_choice names tool %q, which the request does not offer", tc.Name)}
		}
	}
	return nil
}

// notCovered is the reason for tools outside the key's scopes.
func notCovered(tools []string) string {
	quoted := make([]string, len(tools))
	for i, t := range tools {
		quoted[i] = fmt.Sprintf("%q", t)
	}
	if len(tools) == 1 {
		return fmt.Sprintf("tool %s is not covered by the key's tool: scopes", quoted[0])
	}
	return fmt.Sprintf("tools %s are not covered by the key's tool: scopes", strings.Join(quoted, ", "))
}
