package policy

import "github.com/open-policy-agent/opa/v1/ast"

var (
	objectGetRef = ast.MustParseRef("object.get")
	eqRef        = ast.Equality.Ref()
	assignRef    = ast.Assign.Ref()
)

// objectGets finds what object.get(input.<path>, "<name>", default) reads
// in rule r: input.<path>.<name>, not the whole object. The compiler
// binds the object to a variable before the call (__local2__ =
// input.request; object.get(__local2__, "temperature", 1, __local0__)),
// so the analysis looks for variables bound once to a constant reference
// to input whose every other occurrence in the rule is as the object of
// an object.get with a constant name. It returns, for the expression
// binding each such variable, the references it stands for. Any other
// use of the variable leaves the binding to be read as the whole object.
// This keeps the default of an optional field, as docs/policy.md
// suggests writing it, from reading input.request.id.
func objectGets(r *ast.Rule) map[*ast.Expr][]ast.Ref {
	bound := map[ast.Var]*ast.Expr{}
	twice := map[ast.Var]bool{}
	names := map[ast.Var][]string{}
	ast.WalkExprs(r, func(e *ast.Expr) bool {
		if !e.IsCall() {
			return false
		}
		op, args := e.Operator(), e.Operands()
		switch {
		case (op.Equal(eqRef) || op.Equal(assignRef)) && len(args) == 2 && !e.Negated && len(e.With) == 0:
			v, isVar := args[0].Value.(ast.Var)
			if isVar && constantInputRef(args[1]) {
				if _, ok := bound[v]; ok {
					twice[v] = true
				}
				bound[v] = e
			}
		case op.Equal(objectGetRef) && len(args) >= 3:
			v, isVar := args[0].Value.(ast.Var)
			name, isStr := args[1].Value.(ast.String)
			if isVar && isStr {
				names[v] = append(names[v], string(name))
			}
		}
		return false
	})
	if len(bound) == 0 {
		return nil
	}
	uses := map[ast.Var]int{}
	ast.WalkVars(r, func(v ast.Var) bool {
		uses[v]++
		return false
	})
	var out map[*ast.Expr][]ast.Ref
	for v, e := range bound {
		if twice[v] || len(names[v]) == 0 || uses[v] != 1+len(names[v]) {
			continue
		}
		if out == nil {
			out = map[*ast.Expr][]ast.Ref{}
		}
		ref := e.Operand(1).Value.(ast.Ref)
		for _, n := range names[v] {
			out[e] = append(out[e], ref.Append(ast.StringTerm(n)))
		}
	}
	return out
}

// constantInputRef reports whether t is input followed by constant names
// only (input.request, not input.request[k]).
func constantInputRef(t *ast.Term) bool {
	ref, ok := t.Value.(ast.Ref)
	if !ok || len(ref) < 2 || !ref[0].Equal(ast.InputRootDocument) {
		return false
	}
	for _, e := range ref[1:] {
		if _, isStr := e.Value.(ast.String); !isStr {
			return false
		}
	}
	return true
}
