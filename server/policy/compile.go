package policy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	opabundle "github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/rego"
)

// DecisionQuery is the document Tollgate evaluates in a bundle.
const DecisionQuery = "data.tollgate.gateway.decision"

var decisionRef = ast.MustParseRef(DecisionQuery)

// networkBuiltins are refused in bundles: a decision sits on every
// request's path and must not wait on the network.
var networkBuiltins = map[string]struct{}{
	"http.send":          {},
	"net.lookup_ip_addr": {},
}

// Bundle is a compiled policy bundle: immutable, safe for concurrent
// decisions, and cheap to evaluate (its query is prepared once).
type Bundle struct {
	path     string
	revision string
	digest   string
	loadedAt time.Time
	query    rego.PreparedEvalQuery
}

// Path is where the bundle was read from.
func (b *Bundle) Path() string { return b.path }

// Revision is the revision of the bundle's .manifest; empty when it has none.
func (b *Bundle) Revision() string { return b.revision }

// Digest is sha256:<hex> of the bundle as read: of the archive bytes for a
// tarball, of its sorted file list and contents for a directory (see
// docs/policy.md).
func (b *Bundle) Digest() string { return b.digest }

// LoadedAt is when the bundle was compiled.
func (b *Bundle) LoadedAt() time.Time { return b.loadedAt }

// Compile reads, verifies and compiles the bundle at path (a directory or
// an OPA bundle .tar.gz) without activating it. Rego is parsed as v1
// unless the manifest says otherwise.
func Compile(ctx context.Context, path string, opts LoadOptions) (*Bundle, error) {
	src, err := readSource(path)
	if err != nil {
		return nil, fmt.Errorf("policy: read bundle %s: %w", path, err)
	}
	ob, err := opabundle.NewCustomReader(src.loader()).
		WithBundleVerificationConfig(opts.verificationConfig()).
		WithRegoVersion(ast.RegoV1).
		Read()
	if err != nil {
		return nil, fmt.Errorf("policy: load bundle %s: %w", path, err)
	}
	var compiler *ast.Compiler
	pq, err := rego.New(
		rego.Query(DecisionQuery),
		rego.ParsedBundle("tollgate", &ob),
		rego.StoreReadAST(true),
		rego.UnsafeBuiltins(networkBuiltins),
		rego.CompilerHook(func(c *ast.Compiler) { compiler = c }),
	).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("policy: compile bundle %s: %w", path, err)
	}
	if len(compiler.GetRules(decisionRef)) == 0 {
		return nil, fmt.Errorf("policy: bundle %s defines no %s rule", path, DecisionQuery)
	}
	b := &Bundle{
		path:     path,
		revision: ob.Manifest.Revision,
		digest:   src.digest,
		loadedAt: time.Now(),
		query:    pq,
	}
	if err := b.smokeTest(ctx); err != nil {
		return nil, fmt.Errorf("policy: bundle %s fails on a sample request: %w", path, err)
	}
	return b, nil
}

// smokeTest evaluates a representative request so that a bundle whose
// decision fails at evaluation time, or is not a decision object, is
// refused at load instead of failing requests.
func (b *Bundle) smokeTest(ctx context.Context) error {
	in := sampleInput()
	out, err := b.eval(ctx, in.toAST(keyTerm(in.Key), in.Request.effectiveToolChoice(), in.Time))
	if err != nil {
		return err
	}
	if out.undefined {
		return nil // a bundle may leave some requests undecided: they are denied
	}
	if out.malformed != "" {
		return errors.New(out.malformed)
	}
	return nil
}
