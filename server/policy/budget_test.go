package policy

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// slowRego decides slowly (millions of expressions) for one model only, so
// that the bundle passes its smoke test and a request for that model
// meets the evaluation budget.
const slowRego = `package tollgate.gateway

decision := {"allow": true, "reason": "slow"} if {
	input.request.model == "slow/model"
	r := numbers.range(1, 3000)
	count([1 | some a in r; some b in r; a == b]) > 0
} else := {"allow": true, "reason": "fast"}
`

// A decision that runs past the evaluation budget fails, closed, instead
// of holding its request for as long as the bundle runs; other requests
// are decided as usual.
func TestDecisionBudget(t *testing.T) {
	e := load(t, regoBundle(t, "slow", slowRego))
	in := chat(key("app", nil), unset)
	in.Request.Model = "slow/model"
	_, err := e.Decide(context.Background(), in)
	if !errors.Is(err, errEvalBudget) {
		t.Fatalf("a decision past the budget: %v", err)
	}
	if d := decide(t, e, chat(key("app", nil), unset)); !d.Allow || d.Reason != "fast" {
		t.Fatalf("a quick decision after it: %+v", d)
	}
}

// A bundle that runs past the budget on the sample request is refused at
// load: it would fail every request.
func TestSlowBundleRefused(t *testing.T) {
	slowForAll := strings.Replace(slowRego, `input.request.model == "slow/model"`, `true`, 1)
	_, err := Load(context.Background(), regoBundle(t, "slow-for-all", slowForAll), LoadOptions{})
	if !errors.Is(err, errEvalBudget) {
		t.Fatalf("loading a bundle slow for every request: %v", err)
	}
}
