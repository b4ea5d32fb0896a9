package policy

import (
	"maps"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// memoPlan says whether a bundle's decisions may be memoized, and on what.
//
// A bundle's output is a function of the input fields its rules read,
// and of nothing else, when (a) no rule calls a builtin whose result is
// not a function of its arguments (the clock, randomness, the network,
// the runtime) and (b) the data it reads cannot change: a bundle's store
// is written once, when it is activated, and read through one transaction
// for its whole life (Bundle.query). Two inputs that agree on the fields
// read then give the same output, so an output evaluated once may be
// reused for any input equal to it on those fields.
//
// The fields are found by walking every rule of every compiled module
// (reachable from the decision or not, which can only add fields) for
// references to input. A reference whose path leaves the constant names
// (input.request[k]) reads the whole object it indexes; the bare input
// (walk(input), json.marshal(input)) reads every field, the clock and the
// request id included, which makes memoization pointless and so turns it
// off. So does a reference to an object that holds a per-request field,
// such as input.request passed whole to a function, except as the object
// of object.get with a constant name (objectGets).
type memoPlan struct {
	// fields are those the bundle reads: the memo's key.
	fields fieldSet
	// off says why decisions are not memoized; empty when they are.
	off string
}

// unmemoizableBuiltins are refused by name besides every builtin OPA
// marks Nondeterministic: their result, or their effect, is not a
// function of their arguments.
var unmemoizableBuiltins = map[string]struct{}{
	"http.send":          {},
	"net.lookup_ip_addr": {},
	"time.now_ns":        {},
	"opa.runtime":        {},
	"trace":              {},
	"print":              {},
	"internal.print":     {},
}

// unmemoizablePrefixes name families of builtins that are refused whole.
// crypto.x509.parse_and_verify_certificates(_with_options) check a
// chain's validity against the clock unless told a time, and OPA does
// not mark them non-deterministic.
var unmemoizablePrefixes = []string{"rand.", "uuid.", "crypto.x509.parse_and_verify_"}

// planMemo analyses the compiled modules of a bundle.
func planMemo(c *ast.Compiler) memoPlan {
	var p memoPlan
	var gets map[*ast.Expr][]ast.Ref // of the rule walked; see objectGets
	var vis *ast.GenericVisitor
	vis = ast.NewGenericVisitor(func(x any) bool {
		if p.off != "" {
			return true
		}
		switch x := x.(type) {
		case *ast.Expr:
			if refs, ok := gets[x]; ok { // v = input.request, used by object.get only
				for _, ref := range refs {
					p.input(ref)
				}
				return true
			}
			if x.IsCall() {
				p.call(x.Operator())
			}
		case ast.Call:
			if r, ok := x[0].Value.(ast.Ref); ok {
				p.call(r)
			}
		case ast.Ref:
			if len(x) > 0 && x[0].Equal(ast.InputRootDocument) {
				p.input(x)
				for _, t := range x[1:] { // input.tools[input.i]
					vis.Walk(t)
				}
				return true
			}
		case ast.Var:
			if x.Equal(ast.InputRootDocument.Value) { // the bare document
				p.input(ast.InputRootRef)
			}
		}
		return false
	})
	for _, name := range slices.Sorted(maps.Keys(c.Modules)) {
		for _, r := range c.Modules[name].Rules {
			gets = objectGets(r)
			vis.Walk(r)
		}
	}
	return p
}

// call checks a call of the function named by ref.
func (p *memoPlan) call(ref ast.Ref) {
	name := ref.String()
	_, refused := unmemoizableBuiltins[name]
	if b := ast.BuiltinMap[name]; b != nil && b.Nondeterministic {
		refused = true
	}
	for _, prefix := range unmemoizablePrefixes {
		refused = refused || strings.HasPrefix(name, prefix)
	}
	if refused {
		p.off = "calls " + name + ", whose result is not a function of the input"
	}
}

// input adds the fields a reference to input reads.
func (p *memoPlan) input(ref ast.Ref) {
	read, ok := fieldsRead(ref[1:])
	switch {
	case len(ref) == 1:
		p.off = "reads the whole input document"
	case !ok:
		p.off = "reads " + ref.String() + ", which the input document does not have"
	case read&perRequestFields != 0:
		p.off = "reads " + ref.String() + ", which differs for every request"
	}
	p.fields |= read
}
