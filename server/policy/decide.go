package policy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Decide makes the decision for one request: the key's model and tool:
// scopes first (in Go, whatever the bundle says), then the active bundle,
// which may deny or narrow the tools. Every decision, allow or deny, gets
// an ID and one log line. An error means the bundle failed to evaluate;
// there is no decision then and the request must not proceed. The
// bundle's output may be one it evaluated for an earlier request equal
// on every input field the bundle reads (memo.go, memoplan.go); the
// decision built from it is this request's own all the same.
func (e *Engine) Decide(ctx context.Context, in Input) (Decision, error) {
	if in.Key == nil {
		return Decision{}, errors.New("policy: Decide without a key")
	}
	b := e.active.Load()
	d := Decision{ID: newDecisionID(), BundleRevision: b.revision, BundleDigest: b.digest}
	tc := in.Request.effectiveToolChoice()
	if den := checkKey(&in, tc); den != nil {
		d.deny(den)
		e.logDecision(ctx, &in, &d)
		return d, nil
	}
	out, err := e.output(ctx, b, &in, tc)
	if err != nil {
		if ctx.Err() != nil { // the caller gave up; not the bundle's fault
			return Decision{}, fmt.Errorf("policy: decision abandoned: %w", context.Cause(ctx))
		}
		e.logEvalError(ctx, &in, b, err)
		return Decision{}, err
	}
	applyOutput(&d, &in, tc, out)
	e.logDecision(ctx, &in, &d)
	return d, nil
}

// memoKeyBuf is room for a usual memo key on the stack.
const memoKeyBuf = 256

// output is the bundle's output for in: from the bundle's memo when it
// holds one for an input equal on the fields the bundle reads, else
// evaluated (and then memoized).
func (e *Engine) output(ctx context.Context, b *Bundle, in *Input, tc ToolChoice) (output, error) {
	m := b.memo
	if m == nil {
		return b.evalInput(ctx, e.keyTerm(in), in, tc)
	}
	var kt *ast.Term
	var models *ast.Array
	if m.plan.fields.has(fieldKeyModels) {
		kt = e.keyTerm(in)
		models = keyModels(kt)
	}
	var buf [memoKeyBuf]byte
	mk, ok := appendKey(buf[:0], m.plan.fields, in, tc, models)
	if ok {
		if out, hit := m.get(mk); hit {
			if ctx.Err() != nil { // as an evaluation would have stopped
				return output{}, ctx.Err()
			}
			e.memoHits.Add(1)
			return out, nil
		}
	}
	e.memoMisses.Add(1)
	if kt == nil {
		kt = e.keyTerm(in)
	}
	out, err := b.evalInput(ctx, kt, in, tc)
	if err == nil && ok {
		m.put(mk, out)
	}
	return out, err
}

// keyTerm is input.key for in.
func (e *Engine) keyTerm(in *Input) *ast.Term {
	if in.keyOnce {
		return keyTerm(in.Key)
	}
	return e.keys.get(in.Key)
}

// evalInput builds the input document of in and evaluates the bundle on it.
func (b *Bundle) evalInput(ctx context.Context, key *ast.Term, in *Input, tc ToolChoice) (output, error) {
	now := in.Time
	if now.IsZero() {
		now = time.Now()
	}
	doc := inputDocs.Get().(*inputDoc)
	out, err := b.eval(ctx, doc.fill(in, key, tc, now))
	if err != nil {
		// Not reused: the error may refer to the evaluation's terms.
		return output{}, err
	}
	inputDocs.Put(doc) // out holds Go values only
	return out, nil
}

// inputDocs are the input documents of finished decisions, for reuse.
var inputDocs = sync.Pool{New: func() any { return newInputDoc() }}

// applyOutput turns the bundle's output into the decision, narrowing the
// offered tools and checking tool_choice against what remains.
func applyOutput(d *Decision, in *Input, tc ToolChoice, out output) {
	switch {
	case out.undefined:
		d.deny(&denial{by: DeniedByBundle, reason: "the policy bundle made no decision for this request"})
		return
	case out.malformed != "":
		d.deny(&denial{by: DeniedByBundle, reason: "the policy bundle returned a malformed decision: " + out.malformed})
		return
	case !out.allow:
		reason := out.reason
		if reason == "" {
			reason = "denied by the policy bundle"
		}
		d.deny(&denial{by: DeniedByBundle, reason: reason})
		return
	}
	allowed := slices.Clone(in.Request.Tools)
	if out.narrow {
		allowed = nil
		for _, t := range in.Request.Tools {
			if _, ok := out.tools[t]; ok {
				allowed = append(allowed, t)
			} else {
				d.DeniedTools = append(d.DeniedTools, t)
			}
		}
		d.Narrowed = len(d.DeniedTools) > 0
	}
	if d.Narrowed {
		if den := narrowedChoice(allowed, tc); den != nil {
			d.deny(den)
			return
		}
	}
	d.Allow = true
	d.Reason = out.reason
	if d.Reason == "" {
		d.Reason = "allowed"
	}
	d.AllowedTools = allowed
}

// narrowedChoice checks that tool_choice can still be honoured once the
// bundle has removed tools.
func narrowedChoice(allowed []string, tc ToolChoice) *denial {
	switch tc.Mode {
	case ToolChoiceRequired:
		if len(allowed) == 0 {
			return &denial{by: DeniedByBundle, reason: "tool_choice is required but the policy bundle exposes none of the offered tools"}
		}
	case ToolChoiceFunction:
		if slices.Contains(allowed, tc.Name) {
			return nil
		}
		return &denial{by: DeniedByBundle, reason: fmt.Sprintf("tool_choice names tool %q, which the policy bundle does not expose", tc.Name)}
	}
	return nil
}

// deny records a refusal; a denied decision exposes no tools.
func (d *Decision) deny(den *denial) {
	d.Allow = false
	d.DeniedBy = den.by
	d.Reason = den.reason
	d.AllowedTools = nil
	d.Narrowed = false
	if den.tools != nil {
		d.DeniedTools = den.tools
	}
}
