package policy

import (
	"context"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"
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

// keepTerm hands the result back as the Rego term itself, saving the
// conversion to Go values that parseOutput would undo.
func keepTerm(t *ast.Term, _ *rego.EvalContext) (any, error) { return t, nil }

// eval evaluates the prepared decision query on input.
func (b *Bundle) eval(ctx context.Context, input ast.Value) (output, error) {
	// Cancel evaluation when ctx ends without the goroutine OPA would
	// otherwise start per evaluation to watch it.
	cancel := topdown.NewCancel()
	stop := context.AfterFunc(ctx, cancel.Cancel)
	defer stop()
	rs, err := b.query.Eval(ctx,
		rego.EvalParsedInput(input),
		rego.EvalMetrics(metrics.NoOp()),
		rego.EvalGenerateJSON(keepTerm),
		rego.EvalExternalCancel(cancel),
	)
	if err != nil {
		return output{}, fmt.Errorf("policy: evaluate %s: %w", DecisionQuery, err)
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return output{undefined: true}, nil
	}
	t, ok := rs[0].Expressions[0].Value.(*ast.Term)
	if !ok {
		return output{malformed: "decision is not a Rego value"}, nil
	}
	return parseOutput(t.Value), nil
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
