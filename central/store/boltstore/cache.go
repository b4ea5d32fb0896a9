package boltstore

import (
	"bytes"
	"sync"

	"github.com/tollgate-dev/tollgate/audit/head"
)

// maxCachedHeads bounds the head cache; when full it starts again empty.
const maxCachedHeads = 4096

// headCache holds the decoded latest head of recently read trees, with the
// stored bytes it was decoded from: an entry is used only while the stored
// head is still exactly those bytes, so a commit or a prune never needs to
// invalidate anything.
type headCache struct {
	mu sync.RWMutex
	m  map[string]cachedHead
}

type cachedHead struct {
	raw []byte
	h   head.Head
}

func (c *headCache) get(tree, raw []byte) (head.Head, bool) {
	c.mu.RLock()
	e, ok := c.m[string(tree)]
	c.mu.RUnlock()
	if !ok || !bytes.Equal(e.raw, raw) {
		return head.Head{}, false
	}
	return e.h, true
}

func (c *headCache) put(tree, raw []byte, h head.Head) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCachedHeads {
		clear(c.m)
	}
	c.m[string(tree)] = cachedHead{raw: bytes.Clone(raw), h: h}
}
