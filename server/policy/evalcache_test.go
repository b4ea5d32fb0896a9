package policy

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/tollgate-dev/tollgate/server/keys"
)

// TestVirtualCacheMatchesOPA runs the same random operations on our
// virtual cache and on OPA's and requires the same answers, across frames,
// undefined marks, frames large enough to be indexed, and reuse after
// reset.
func TestVirtualCacheMatchesOPA(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// References over a few heads and keys, so that hits, prefixes and
	// extensions of cached references all occur.
	heads := []ast.Ref{
		ast.MustParseRef("data.tollgate.gateway.decision"),
		ast.MustParseRef("data.tollgate.gateway.deny"),
		ast.MustParseRef("data.tollgate.gateway"),
		ast.MustParseRef("data.x"),
	}
	var refs []ast.Ref
	for _, h := range heads {
		refs = append(refs, h)
		for i := range 40 {
			refs = append(refs, h.Append(ast.IntNumberTerm(i)), h.Append(ast.StringTerm("k")).Append(ast.IntNumberTerm(i)))
		}
	}
	values := []*ast.Term{nil, ast.BooleanTerm(true), ast.StringTerm("a"), ast.IntNumberTerm(7)}

	ours := &virtualCache{indexFrame: -1}
	for round := range 20 {
		theirs := topdown.NewVirtualCache()
		depth := 0
		for op := range 3000 {
			ref := refs[rng.IntN(len(refs))]
			// The evaluator hands over slices of buffers it reuses:
			// pass a copy and scribble over it afterwards.
			arg := slices.Clone(ref)
			switch n := rng.IntN(100); {
			case n < 2 && depth < 4:
				ours.Push()
				theirs.Push()
				depth++
			case n < 4 && depth > 0:
				ours.Pop()
				theirs.Pop()
				depth--
			case n < 50:
				v := values[rng.IntN(len(values))]
				ours.Put(arg, v)
				theirs.Put(ref, v)
			default:
				gv, gu := ours.Get(arg)
				wv, wu := theirs.Get(ref)
				if gu != wu || !termsEqual(gv, wv) {
					t.Fatalf("round %d op %d: Get(%v) = %v, %v; OPA's cache says %v, %v", round, op, ref, gv, gu, wv, wu)
				}
			}
			for i := range arg {
				arg[i] = ast.StringTerm("scribbled")
			}
		}
		if !ours.reset() {
			t.Fatalf("round %d: cache too large to keep", round)
		}
	}
}

func termsEqual(a, b *ast.Term) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(b)
}

// TestEvalMatchesRego evaluates bundles with features the default bundle
// does not use (with, functions, partial objects, data documents,
// comprehensions, builtin errors) through the engine and through OPA's
// rego API on the same input, and requires the same decision document.
func TestEvalMatchesRego(t *testing.T) {
	const rules = `package tollgate.gateway

limits := {"acme": 2, "other": 0}

max_tools(tenant) := n if n := limits[tenant]
max_tools(tenant) := 1 if not limits[tenant]

deny contains sprintf("at most %d tools for %s", [max_tools(input.key.tenant_id), input.key.tenant_id]) if {
	count(input.request.tools) > max_tools(input.key.tenant_id)
}

deny contains "denied under a mocked label" if {
	ci_label with input.key.label as "ci"
	input.request.model == "builtin/mock"
}

ci_label if input.key.label == "ci"

allowed_tools[t] := true if {
	some t in input.request.tools
	not startswith(t, "x_")
}

quota := to_number("not a number") # a builtin error: undefined, not fatal

decision := {"allow": false, "reason": concat("; ", sort(deny))} if {
	count(deny) > 0
} else := {
	"allow": true,
	"reason": sprintf("%d of %d tools, %v", [count(allowed_tools), count(input.request.tools), data.tollgate.settings.mode]),
	"tools": [t | some t, _ in allowed_tools],
}
`
	dir := writeBundle(t, map[string]string{
		".manifest":                        `{"revision": "diff-1", "roots": ["tollgate"]}`,
		"tollgate/gateway.rego":            rules,
		"tollgate/settings/data.json":      `{"mode": "strict"}`,
		"tollgate/settings/more/data.json": `{"unused": [1, 2, 3]}`,
	})
	e := load(t, dir)
	b := e.Active()
	ref := regoReference(t, dir)

	acme := key("app", nil, "tool:*")
	other := keyWithTenant("other", "app", "tool:*")
	stranger := keyWithTenant("stranger", "ci", "tool:*")
	inputs := []Input{
		chat(acme, auto),
		chat(acme, auto, "get_weather"),
		chat(acme, auto, "get_weather", "x_debug"),
		chat(acme, auto, "a", "b", "c"),
		chat(other, auto, "get_weather"),
		chat(stranger, none),
		chat(stranger, auto, "x_one"),
	}
	mock := chat(stranger, unset)
	mock.Request.Model = "builtin/mock"
	inputs = append(inputs, mock)
	for i, in := range inputs {
		for range 3 { // reuse pooled state
			v := in.toAST(keyTerm(in.Key), in.Request.effectiveToolChoice(), in.Time)
			got, err := b.eval(context.Background(), v)
			if err != nil {
				t.Fatalf("input %d: %v", i, err)
			}
			want := ref(v)
			if got.undefined != (want == nil) {
				t.Fatalf("input %d: undefined = %v, rego says %v", i, got.undefined, want)
			}
			if want != nil {
				if w := parseOutput(want.Value); !outputsEqual(got, w) {
					t.Fatalf("input %d: output %+v, rego gives %+v", i, got, w)
				}
			}
		}
	}
}

func outputsEqual(a, b output) bool {
	if a.undefined != b.undefined || a.malformed != b.malformed || a.allow != b.allow ||
		a.reason != b.reason || a.narrow != b.narrow || len(a.tools) != len(b.tools) {
		return false
	}
	for k := range a.tools {
		if _, ok := b.tools[k]; !ok {
			return false
		}
	}
	return true
}

func keyWithTenant(tenant, label string, scopes ...string) *keys.Principal {
	return keys.NewPrincipal(tenant, "key_test2", label, true, nil, 0, 0, scopes, time.Time{})
}

// regoReference evaluates the decision of the bundle directory dir the
// way OPA's rego API does by default.
func regoReference(t *testing.T, dir string) func(ast.Value) *ast.Term {
	t.Helper()
	pq, err := rego.New(rego.Query(DecisionQuery), rego.LoadBundle(dir)).PrepareForEval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return func(input ast.Value) *ast.Term {
		rs, err := pq.Eval(context.Background(), rego.EvalParsedInput(input))
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 0 {
			return nil
		}
		v, err := ast.InterfaceToValue(rs[0].Expressions[0].Value)
		if err != nil {
			t.Fatal(err)
		}
		return ast.NewTerm(v)
	}
}

// TestDecideCancelled: a decision whose context ends stops evaluating and
// returns an error naming the cause, whether the context ended before the
// evaluation or during it.
func TestDecideCancelled(t *testing.T) {
	slow := regoBundle(t, "slow-1", `package tollgate.gateway

slow if input.request.model == "builtin/slow"

# About ten million steps when the model is builtin/slow.
n := count([1 | slow; some i in numbers.range(1, 3200); some j in numbers.range(1, 3200); i != j])

decision := {"allow": n >= 0}
`)
	e := load(t, slow)
	in := chat(key("app", nil), unset)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Decide(ctx, in); !errors.Is(err, context.Canceled) {
		t.Fatalf("Decide with a cancelled context: %v, want context.Canceled", err)
	}

	in.Request.Model = "builtin/slow"
	ctx, stop := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer stop()
	if _, err := e.Decide(ctx, in); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Decide past its deadline: %v, want context.DeadlineExceeded", err)
	}
	// The engine still decides afterwards.
	in.Request.Model = "builtin/echo"
	if d := decide(t, e, in); !d.Allow {
		t.Fatalf("decision after a cancelled one: %+v", d)
	}
}
