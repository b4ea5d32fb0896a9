package policy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	opabundle "github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// DecisionQuery is the document Tollgate evaluates in a bundle.
const DecisionQuery = "data.tollgate.gateway.decision"

var decisionRef = ast.MustParseRef(DecisionQuery)

// decisionVar is bound to the decision by the query evaluated per request,
// decisionVar = data.tollgate.gateway.decision.
var decisionVar = ast.Var("decision")

// networkBuiltins are refused in bundles: a decision sits on every
// request's path and must not wait on the network.
var networkBuiltins = map[string]struct{}{
	"http.send":          {},
	"net.lookup_ip_addr": {},
}

// Bundle is a compiled policy bundle: immutable, safe for concurrent
// decisions, and cheap to evaluate: its modules and its query are compiled
// once, and a decision only evaluates them.
type Bundle struct {
	path     string
	revision string
	digest   string
	loadedAt time.Time
	// query is the prepared decision query, ready but for its input; every
	// evaluation starts from a copy of it. It reads the bundle's private
	// store through one read transaction held for the bundle's life: the
	// store is written once, when the bundle is activated into it, and
	// never again, so the transaction sees the same data for every
	// decision (OPA's in-memory store serves reads of one transaction
	// concurrently).
	query topdown.Query
	// memo holds the outputs of earlier decisions when the bundle's
	// decisions may be memoized (memoPlan); nil when not, memoOff then
	// says why.
	memo    *memo
	memoOff string
}

// DecisionMemo describes the bundle's decision memo for operators: the
// input fields it is keyed on when decisions are memoized, or why they
// are not.
func (b *Bundle) DecisionMemo() (memoized bool, detail string) {
	if b.memo == nil {
		return false, b.memoOff
	}
	return true, b.memo.plan.fields.names()
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
	if len(ob.WasmModules) > 0 {
		return nil, fmt.Errorf("policy: bundle %s holds Wasm modules; Tollgate evaluates Rego only", path)
	}
	compiler, query, err := prepare(ctx, &ob)
	if err != nil {
		return nil, fmt.Errorf("policy: compile bundle %s: %w", path, err)
	}
	if len(compiler.GetRules(decisionRef)) == 0 {
		return nil, fmt.Errorf("policy: bundle %s defines no %s rule", path, DecisionQuery)
	}
	plan := planMemo(compiler)
	b := &Bundle{
		path:     path,
		revision: ob.Manifest.Revision,
		digest:   src.digest,
		loadedAt: time.Now(),
		query:    query,
		memo:     opts.newMemo(&plan),
		memoOff:  plan.off,
	}
	if err := b.smokeTest(ctx); err != nil {
		return nil, fmt.Errorf("policy: bundle %s fails on a sample request: %w", path, err)
	}
	return b, nil
}

// prepare activates the bundle into a store of its own and compiles its
// modules (OPA's rego package does both, refusing the network builtins),
// then compiles the decision query against them and sets up everything of
// an evaluation that does not depend on the request. Decisions evaluate
// the query with OPA's evaluator (topdown) directly: the rego package
// would build an evaluation context, open a transaction and convert the
// result set on every call, about a third of what a decision allocated.
func prepare(ctx context.Context, ob *opabundle.Bundle) (*ast.Compiler, topdown.Query, error) {
	store := inmem.NewWithOpts(inmem.OptReturnASTValuesOnRead(true), inmem.OptRoundTripOnWrite(false))
	txn, err := store.NewTransaction(ctx, storage.WriteParams)
	if err != nil {
		return nil, topdown.Query{}, err
	}
	var compiler *ast.Compiler
	_, err = rego.New(
		rego.Query(DecisionQuery),
		rego.ParsedBundle("tollgate", ob),
		rego.Store(store),
		rego.Transaction(txn),
		rego.UnsafeBuiltins(networkBuiltins),
		rego.CompilerHook(func(c *ast.Compiler) { compiler = c }),
	).PrepareForEval(ctx)
	if err != nil {
		store.Abort(ctx, txn)
		return nil, topdown.Query{}, err
	}
	if err := store.Commit(ctx, txn); err != nil {
		return nil, topdown.Query{}, err
	}
	qc := compiler.QueryCompiler() // inherits the compiler's unsafe builtins
	body, err := qc.Compile(ast.NewBody(ast.Equality.Expr(ast.NewTerm(decisionVar), ast.NewTerm(decisionRef))))
	if err != nil {
		return nil, topdown.Query{}, err
	}
	read, err := store.NewTransaction(ctx) // held for the bundle's life; see Bundle.query
	if err != nil {
		return nil, topdown.Query{}, err
	}
	q := topdown.NewQuery(body).
		WithQueryCompiler(qc).
		WithCompiler(compiler).
		WithStore(store).
		WithTransaction(read).
		WithMetrics(metrics.NoOp())
	return compiler, *q, nil
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
