package policy

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// virtualCache is a topdown.VirtualCache that can be reset and reused, so
// that a decision does not build a fresh cache. OPA's own cache is a trie
// with a hash map per level, which cost about 25 allocations per decision
// with the default bundle; this one keeps the entries of all frames in
// one slice and, once a frame grows past linearScanMax entries, indexes
// them by hash.
//
// It behaves as OPA's cache does: Get sees only the entries of the top
// frame (Push opens an empty frame for a `with` statement, Pop discards
// it), putting nil marks a reference undefined, and a reference is a hit
// only when it equals a cached one exactly (a prefix or an extension of a
// cached reference is a miss).
//
// One virtualCache serves one evaluation at a time.
type virtualCache struct {
	entries []vcEntry
	// frames are the indexes in entries where each frame above the
	// bottom one starts.
	frames []int
	// terms backs copies of the references put: the evaluator passes
	// slices of buffers it reuses.
	terms []*ast.Term
	// index maps a reference hash to the newest entry with that hash
	// (entries chain to older ones through prev); built for the top
	// frame only once it is large, and dropped when that frame is popped.
	index      map[int]int
	indexFrame int // len(frames) when index was built; -1 when none
}

type vcEntry struct {
	ref       ast.Ref
	hash      int
	value     *ast.Term
	undefined bool
	prev      int // the previous entry with the same hash, when indexed; -1 when none
}

// linearScanMax is the frame size up to which lookups scan the frame;
// past it they use the index. A decision with the default bundle caches
// two references.
const linearScanMax = 16

// maxPooledEntries bounds what a cache may hold and still be kept for the
// next decision, so that one unusual evaluation does not pin memory.
const maxPooledEntries = 1024

var _ topdown.VirtualCache = (*virtualCache)(nil)

func (c *virtualCache) frameStart() int {
	if len(c.frames) == 0 {
		return 0
	}
	return c.frames[len(c.frames)-1]
}

// Push opens an empty frame.
func (c *virtualCache) Push() {
	c.frames = append(c.frames, len(c.entries))
}

// Pop discards the top frame and its entries.
func (c *virtualCache) Pop() {
	if len(c.frames) == 0 {
		// OPA's cache cannot pop its bottom frame either; keep ours.
		return
	}
	if c.indexFrame == len(c.frames) {
		clear(c.index)
		c.indexFrame = -1
	}
	start := c.frames[len(c.frames)-1]
	c.frames = c.frames[:len(c.frames)-1]
	clear(c.entries[start:])
	c.entries = c.entries[:start]
}

// find returns the index of the entry for ref in the top frame, or -1.
func (c *virtualCache) find(ref ast.Ref, hash int) int {
	start := c.frameStart()
	if c.indexFrame == len(c.frames) {
		i, ok := c.index[hash]
		for ok && i >= start {
			if refEqual(c.entries[i].ref, ref) {
				return i
			}
			i = c.entries[i].prev
			ok = i >= 0
		}
		return -1
	}
	for i := len(c.entries) - 1; i >= start; i-- {
		if e := &c.entries[i]; e.hash == hash && refEqual(e.ref, ref) {
			return i
		}
	}
	return -1
}

// Get returns the cached value of ref: (value, false) when it is cached,
// (nil, true) when it is cached as undefined, (nil, false) when it is not
// cached.
func (c *virtualCache) Get(ref ast.Ref) (*ast.Term, bool) {
	i := c.find(ref, ref.Hash())
	if i < 0 {
		return nil, false
	}
	if e := &c.entries[i]; e.undefined {
		return nil, true
	} else {
		return e.value, false
	}
}

// Put caches value for ref; a nil value marks ref undefined.
func (c *virtualCache) Put(ref ast.Ref, value *ast.Term) {
	hash := ref.Hash()
	i := c.find(ref, hash)
	if i < 0 {
		start := len(c.terms)
		c.terms = append(c.terms, ref...)
		c.entries = append(c.entries, vcEntry{
			ref:  c.terms[start:len(c.terms):len(c.terms)],
			hash: hash,
			prev: -1,
		})
		i = len(c.entries) - 1
		c.indexEntry(i)
	}
	// As in OPA's trie: a value replaces the previous one, and an
	// undefined mark stays.
	if e := &c.entries[i]; value != nil {
		e.value = value
	} else {
		e.undefined = true
	}
}

// indexEntry adds entry i to the index, building the index for the top
// frame when that frame has just grown past linearScanMax.
func (c *virtualCache) indexEntry(i int) {
	start := c.frameStart()
	switch {
	case c.indexFrame == len(c.frames):
		c.link(i)
	case i-start+1 > linearScanMax:
		if c.index == nil {
			c.index = make(map[int]int, 2*linearScanMax)
		}
		clear(c.index)
		c.indexFrame = len(c.frames)
		for j := start; j <= i; j++ {
			c.link(j)
		}
	}
}

func (c *virtualCache) link(i int) {
	e := &c.entries[i]
	if prev, ok := c.index[e.hash]; ok {
		e.prev = prev
	} else {
		e.prev = -1
	}
	c.index[e.hash] = i
}

// Keys returns the references cached with a value in the top frame.
func (c *virtualCache) Keys() []ast.Ref {
	var keys []ast.Ref
	for _, e := range c.entries[c.frameStart():] {
		if e.value != nil {
			keys = append(keys, e.ref)
		}
	}
	return keys
}

// reset empties the cache for the next evaluation. It reports whether the
// cache is small enough to keep.
func (c *virtualCache) reset() bool {
	if len(c.entries) > maxPooledEntries || len(c.terms) > 8*maxPooledEntries {
		return false
	}
	clear(c.entries)
	c.entries = c.entries[:0]
	c.frames = c.frames[:0]
	clear(c.terms)
	c.terms = c.terms[:0]
	clear(c.index)
	c.indexFrame = -1
	return true
}

func refEqual(a, b ast.Ref) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

// ctxCancel stops an evaluation once its context ends, or once it has run
// longer than evalBudget. OPA checks Cancelled before every expression;
// reading the context's state there costs an atomic load, where the usual
// topdown.Cancel needs a goroutine or a context.AfterFunc registration per
// evaluation, and the clock is read only every clockEvery checks.
type ctxCancel struct {
	ctx      context.Context
	deadline time.Time
	checks   uint32
	expired  bool
}

// evalBudget bounds one evaluation of a bundle's decision. The default
// bundle decides in microseconds; a bundle that takes longer than this
// for a request is broken, and its decision fails (closed) rather than
// holding the request, or the watcher's reload, for as long as it runs.
const evalBudget = 250 * time.Millisecond

// clockEvery is how many expressions pass between two readings of the
// clock.
const clockEvery = 256

// errEvalBudget is an evaluation stopped by evalBudget.
var errEvalBudget = fmt.Errorf("the bundle's decision ran longer than %v", evalBudget)

var _ topdown.Cancel = (*ctxCancel)(nil)

// Cancel does nothing: only the context or the budget cancels an
// evaluation.
func (*ctxCancel) Cancel() {}

// Cancelled reports whether the context has ended or the budget is spent.
func (c *ctxCancel) Cancelled() bool {
	if c.expired || c.ctx.Err() != nil {
		return true
	}
	c.checks++
	if c.checks%clockEvery == 0 && time.Now().After(c.deadline) {
		c.expired = true
	}
	return c.expired
}

// evalState is everything one evaluation needs besides the input: the
// query, its virtual cache and cancellation, the caller metadata OPA hands
// to builtins, and the result. evalStates are pooled, so that a decision
// allocates none of these.
type evalState struct {
	query    topdown.Query
	input    ast.Term
	vc       virtualCache
	cancel   ctxCancel
	meta     map[string]any
	decision *ast.Term
	// iter is collect, bound once so that no evaluation allocates it.
	iter func(topdown.QueryResult) error
}

var evalStates = sync.Pool{New: func() any {
	s := &evalState{vc: virtualCache{indexFrame: -1}, meta: map[string]any{}}
	s.iter = s.collect
	return s
}}

// collect keeps the decision of a query result.
func (s *evalState) collect(qr topdown.QueryResult) error {
	if s.decision == nil {
		s.decision = qr[decisionVar]
	}
	return nil
}

// getEvalState returns a state ready to evaluate b's query on input.
func getEvalState(ctx context.Context, b *Bundle, input ast.Value) *evalState {
	s := evalStates.Get().(*evalState)
	s.input.Value = input
	s.cancel = ctxCancel{ctx: ctx, deadline: time.Now().Add(evalBudget)}
	s.query = b.query
	s.query.WithInput(&s.input).
		WithCancel(&s.cancel).
		WithVirtualCache(&s.vc).
		WithRequestMetadata(s.meta)
	return s
}

// putEvalState returns s to the pool once the evaluation has returned
// without error and its result has been read: nothing of that evaluation
// refers to s then.
func putEvalState(s *evalState) {
	s.query = topdown.Query{}
	s.input.Value = nil
	s.cancel = ctxCancel{}
	s.decision = nil
	clear(s.meta)
	if s.vc.reset() {
		evalStates.Put(s)
	}
}
