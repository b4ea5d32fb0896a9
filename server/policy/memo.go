package policy

import (
	"hash/maphash"
	"sync"
)

// Default bounds of a bundle's decision memo (LoadOptions).
const (
	DefaultDecisionMemoEntries = 8192
	DefaultDecisionMemoBytes   = 8 << 20
)

// memoShards spreads the memo over locks, so that concurrent decisions
// rarely meet on one; a hit takes its shard's read lock only.
const memoShards = 16

// memo holds the outputs a bundle evaluated, by the values of the input
// fields the bundle reads (memoPlan, appendKey). It belongs to one
// bundle: a reload activates a new bundle with an empty memo, and the old
// one goes with the old bundle. Only outputs are kept; every decision
// still gets its own id, narrowing against its own request and its own
// log line (Engine.Decide).
//
// It is bounded by entries and by bytes, each shard by its share of both;
// a full shard drops entries chosen at random (Go's map iteration order)
// to make room. Outputs are immutable once stored, so readers share them.
type memo struct {
	plan       memoPlan
	seed       maphash.Seed
	maxEntries int // per shard
	maxBytes   int // per shard
	shards     [memoShards]memoShard
}

type memoShard struct {
	mu    sync.RWMutex
	m     map[string]output
	bytes int
	// pad makes a shard 128 bytes, so two shards' locks never share a
	// cache line.
	_ [88]byte
}

// newMemo returns an empty memo for plan, bounded to about entries and
// bytes in all.
func newMemo(plan memoPlan, entries, bytes int) *memo {
	m := &memo{
		plan:       plan,
		seed:       maphash.MakeSeed(),
		maxEntries: max(1, entries/memoShards),
		maxBytes:   max(1, bytes/memoShards),
	}
	for i := range m.shards {
		m.shards[i].m = make(map[string]output)
	}
	return m
}

func (m *memo) shard(key []byte) *memoShard {
	return &m.shards[maphash.Bytes(m.seed, key)%memoShards]
}

// get returns the output stored for key.
func (m *memo) get(key []byte) (output, bool) {
	s := m.shard(key)
	s.mu.RLock()
	out, ok := s.m[string(key)]
	s.mu.RUnlock()
	return out, ok
}

// put stores out for key, dropping other entries when the shard is full.
// An entry larger than a shard's share of the bytes is not stored.
func (m *memo) put(key []byte, out output) {
	size := entrySize(len(key), &out)
	if size > m.maxBytes {
		return
	}
	s := m.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[string(key)]; ok {
		return // another decision stored the same output meanwhile
	}
	for len(s.m) >= m.maxEntries || s.bytes+size > m.maxBytes {
		for k, v := range s.m {
			delete(s.m, k)
			s.bytes -= entrySize(len(k), &v)
			break
		}
	}
	s.m[string(key)] = out
	s.bytes += size
}

// entryOverhead approximates what an entry costs besides its strings: the
// map slot, the key's and output's headers, the tools set's table.
const entryOverhead = 128

// entrySize is what an entry is counted as against the memo's bytes.
func entrySize(keyLen int, out *output) int {
	n := entryOverhead + keyLen + len(out.reason) + len(out.malformed)
	for t := range out.tools {
		n += len(t) + 32
	}
	return n
}

// stats returns the entries and bytes held.
func (m *memo) stats() (entries, bytes int) {
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.RLock()
		entries += len(s.m)
		bytes += s.bytes
		s.mu.RUnlock()
	}
	return entries, bytes
}
