package receipt

import "github.com/transparency-dev/merkle/rfc6962"

// Tree is the RFC 6962 Merkle tree of a batch's claim hashes, every level
// kept, so that each claim's path is read off it without hashing.
type Tree struct {
	levels [][][]byte
}

// NewTree builds the tree of the claim hashes leaves (at least one). A
// level's last node without a sibling moves up unchanged, which gives the
// root and paths of RFC 6962 (RFC 9162, 2.1.1) for any size.
func NewTree(leaves [][]byte) *Tree {
	t := &Tree{levels: [][][]byte{leaves}}
	for level := leaves; len(level) > 1; {
		up := make([][]byte, 0, (len(level)+1)/2)
		for i := 0; i+1 < len(level); i += 2 {
			up = append(up, rfc6962.DefaultHasher.HashChildren(level[i], level[i+1]))
		}
		if len(level)%2 == 1 {
			up = append(up, level[len(level)-1])
		}
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
