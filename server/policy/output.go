package policy

import (
	"context"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
)

// output is the bundle's decision document, data.tollgate.gateway.decision.
type output struct {
	// undefined: the bundle produced no decision for this input.
	undefined bool
	// malformed says what is wrong with a decision that is not an object
	// with a boolean allow; empty when it is well formed.
	malformed string
	allow     bool
	reason    string
	// narrow is set when the decision has a tools field; tools then holds
	// the tools the bundle lets through.
	narrow bool
	tools  map[string]struct{}
}

var (
	allowKey  = ast.StringTerm("allow")
	reasonKey = ast.StringTerm("reason")
	toolsKey  = ast.StringTerm("tools")
)

// eval evaluates the decision query on input.
func (b *Bundle) eval(ctx context.Context, input ast.Value) (output, error) {
	st := getEvalState(ctx, b, input)
	if err := st.query.Iter(ctx, st.iter); err != nil {
		// st is not reused: the error may still refer to the evaluation.
		if st.cancel.expired {
			err = errEvalBudget
		}
		return output{}, fmt.Errorf("policy: evaluate %s: %w", DecisionQuery, err)
	}
	out := output{undefined: true}
	if st.decision != nil {
		out = parseOutput(st.decision.Value)
	}
	putEvalState(st)
	return out, nil
}

// parseOutput reads {"allow": bool, "reason": string, "tools": [string]}.
func parseOutput(v ast.Value) output {
	obj, ok := v.(ast.Object)
	if !ok {
		return output{malformed: fmt.Sprintf("decision is a %s, not an object", ast.ValueName(v))}
	}
	var out output
	allow := obj.Get(allowKey)
	if allow == nil {
		return output{malformed: "decision has no allow field"}
	}
	b, ok := allow.Value.(ast.Boolean)
	if !ok {
		return output{malformed: "decision.allow is not a boolean"}
	}
	out.allow = bool(b)
	if r := obj.Get(reasonKey); r != nil {
		s, ok := r.Value.(ast.String)
		if !ok {
			return output{malformed: "decision.reason is not a string"}
		}
		out.reason = string(s)
	}
	if t := obj.Get(toolsKey); t != nil {
		tools, ok := stringSet(t.Value)
		if !ok {
			return output{malformed: "decision.tools is not an array or set of strings"}
		}
		out.narrow, out.tools = true, tools
	}
	return out
}

// stringSet reads an array or set of strings.
func stringSet(v ast.Value) (map[string]struct{}, bool) {
	out := map[string]struct{}{}
	ok := true
	add := func(t *ast.Term) {
		if s, isStr := t.Value.(ast.String); isStr {
			out[string(s)] = struct{}{}
		} else {
			ok = false
		}
	}
	switch c := v.(type) {
	case *ast.Array:
		c.Foreach(add)
	case ast.Set:
		c.Foreach(add)
	default:
		return nil, false
	}
	return out, ok
}
