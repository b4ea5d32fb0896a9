package store

import (
	"encoding/hex"
	"fmt"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// InclusionHashes builds the RFC 6962 audit path of leaf index in a tree of
// size leaves from stored complete-subtree hashes: get returns the hashes
// of the nodes asked for, in order. Implementations call it inside their
// read transaction.
func InclusionHashes(index, size uint64, get func([]compact.NodeID) ([][]byte, error)) ([][]byte, error) {
	nodes, err := proof.Inclusion(index, size)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return rehash(nodes, get)
}

// ConsistencyHashes builds the RFC 6962 consistency proof from the first
// size1 leaves of a tree to its first size2 from stored complete-subtree
// hashes: get returns the hashes of the nodes asked for, in order (none
// are asked for when size1 is 0 or size2).
func ConsistencyHashes(size1, size2 uint64, get func([]compact.NodeID) ([][]byte, error)) ([][]byte, error) {
	nodes, err := proof.Consistency(size1, size2)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if len(nodes.IDs) == 0 {
		return nil, nil
	}
	return rehash(nodes, get)
}

// rehash reads the stored hashes of a proof's nodes with get and turns
// them into the proof's hashes.
func rehash(nodes proof.Nodes, get func([]compact.NodeID) ([][]byte, error)) ([][]byte, error) {
	hashes, err := get(nodes.IDs)
	if err != nil {
		return nil, err
	}
	out, err := nodes.Rehash(hashes, rfc6962.DefaultHasher.HashChildren)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return out, nil
}

// HexHashes is hashes in lowercase hex, as proofs are served and kept
// (empty, not nil, when none).
func HexHashes(hashes [][]byte) []string {
	out := make([]string, len(hashes))
	for i, b := range hashes {
		out[i] = hex.EncodeToString(b)
	}
	return out
}
