package policy

import (
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/tollgate-dev/tollgate/server/keys"
)

// maxKeyTerms bounds the key cache; reaching it empties the cache.
const maxKeyTerms = 4096

// keyTerms caches input.key per Principal. A Principal is immutable once
// published (a changed key record yields a new Principal), and the edge
// decides many requests with the same one, so its Rego value is built
// once. The cache holds its Principals, so a pointer can never be reused
// for another key while cached; it is emptied when it reaches maxKeyTerms.
// Principals built for one call (the gRPC service's, Input.keyOnce) are
// not cached: each could hold tens of KB of models and scopes, and 4096 of
// them hundreds of MB.
type keyTerms struct {
	m sync.Map // *keys.Principal → *ast.Term
	n atomic.Int64
}

// get returns the input.key term of p, building it on first use.
func (c *keyTerms) get(p *keys.Principal) *ast.Term {
	if t, ok := c.m.Load(p); ok {
		return t.(*ast.Term)
	}
	t := keyTerm(p)
	if _, loaded := c.m.LoadOrStore(p, t); !loaded && c.n.Add(1) > maxKeyTerms {
		c.m.Clear()
		c.n.Store(0)
	}
	return t
}
