package receipt

import (
	"crypto/sha256"
	"math/bits"
)

// Tree is the RFC 6962 Merkle tree of a batch's claim hashes, every level
// kept, so that each claim's path is read off it without hashing.
type Tree struct {
	levels [][][]byte
}

// NewTree builds the tree of the claim hashes leaves (at least one, each
// of 32 bytes). A level's last node without a sibling moves up unchanged,
// which gives the root and paths of RFC 6962 (RFC 9162, 2.1.1) for any
// size. The inner nodes share one allocation.
func NewTree(leaves [][]byte) *Tree {
	inner := max(len(leaves)-1, 0) // a tree of n leaves has n-1 inner nodes
	t := &Tree{levels: make([][][]byte, 1, bits.Len(uint(inner))+1)}
	t.levels[0] = leaves
	// The levels above the leaves share one allocation, the inner nodes'
	// hashes another: a level is the previous one's half rounded up, so
	// the levels above the leaves hold at most n + log2(n) entries.
	nodes := make([][]byte, 0, len(leaves)+bits.Len(uint(len(leaves))))
	slab := make([]byte, 0, sha256.Size*inner)
	var buf [1 + 2*sha256.Size]byte
	buf[0] = 1 // RFC 6962's node prefix
	for level := leaves; len(level) > 1; {
		start := len(nodes)
		for i := 0; i+1 < len(level); i += 2 {
			copy(buf[1:], level[i])
			copy(buf[1+sha256.Size:], level[i+1])
			h := sha256.Sum256(buf[:])
			slab = append(slab, h[:]...)
			nodes = append(nodes, slab[len(slab)-sha256.Size:len(slab):len(slab)])
		}
		if len(level)%2 == 1 {
			nodes = append(nodes, level[len(level)-1])
		}
		up := nodes[start:len(nodes):len(nodes)]
		t.levels = append(t.levels, up)
		level = up
	}
	return t
}

// Size is the number of claims.
func (t *Tree) Size() uint64 { return uint64(len(t.levels[0])) }

// Root is the tree's RFC 6962 root.
func (t *Tree) Root() []byte { return t.levels[len(t.levels)-1][0] }

// Path is the RFC 6962 inclusion proof of claim i, from the claim up.
func (t *Tree) Path(i uint64) [][]byte {
	var path [][]byte
	for _, level := range t.levels[:len(t.levels)-1] {
		if s := i ^ 1; s < uint64(len(level)) {
			path = append(path, level[s])
		}
		i >>= 1
	}
	return path
}
