package log

import (
	"encoding/binary"
	"fmt"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	bolt "go.etcd.io/bbolt"
)

var (
	hasher = rfc6962.DefaultHasher
	ranges = &compact.RangeFactory{Hash: hasher.HashChildren}
)

// tree is the state of one tenant's tree of one day: its size, the
// appliance-wide sequence of its last leaf, and the compact range [0, size)
// from which the root follows. Every node the range completes is stored in
// bucketNodes for proofs.
type tree struct {
	day, tenant string
	size        uint64
	lastSeq     uint64
	rng         *compact.Range
}

// treeStateVersion starts an encoded tree state.
const treeStateVersion = 1

// encode is version | size | last sequence | count | hashes.
func (t *tree) encode() []byte {
	hashes := t.rng.Hashes()
	out := make([]byte, 0, 1+8+8+1+32*len(hashes))
	out = append(out, treeStateVersion)
	out = binary.BigEndian.AppendUint64(out, t.size)
	out = binary.BigEndian.AppendUint64(out, t.lastSeq)
	out = append(out, byte(len(hashes)))
	for _, h := range hashes {
		out = append(out, h...)
	}
	return out
}

// loadTree reads a tree state; a tree never stored is empty.
func loadTree(tx *bolt.Tx, day, tenant string) (*tree, error) {
	return decodeTree(day, tenant, tx.Bucket(bucketTrees).Get(treeKey(day, tenant)))
}

// decodeTree decodes a stored tree state (nil: the empty tree).
func decodeTree(day, tenant string, v []byte) (*tree, error) {
	t := &tree{day: day, tenant: tenant}
	if v == nil {
		t.rng = ranges.NewEmptyRange(0)
		return t, nil
	}
	if len(v) < 18 || v[0] != treeStateVersion || len(v) != 18+32*int(v[17]) {
		return nil, fmt.Errorf("audit log: malformed tree state of %s/%s", day, tenant)
	}
	t.size = binary.BigEndian.Uint64(v[1:9])
	t.lastSeq = binary.BigEndian.Uint64(v[9:17])
	hashes := make([][]byte, v[17])
	for i := range hashes {
		hashes[i] = append([]byte{}, v[18+32*i:18+32*(i+1)]...)
	}
	rng, err := ranges.NewRange(0, t.size, hashes)
	if err != nil {
		return nil, fmt.Errorf("audit log: tree state of %s/%s: %w", day, tenant, err)
	}
	t.rng = rng
	return t, nil
}

// append adds a leaf hash, passing every node it completes to put.
func (t *tree) append(put func(key, hash []byte), leafHash []byte) error {
	err := t.rng.Append(leafHash, func(id compact.NodeID, hash []byte) {
		put(nodeKey(t.day, t.tenant, id.Level, id.Index), hash)
	})
	if err != nil {
		return fmt.Errorf("audit log: tree %s/%s: %w", t.day, t.tenant, err)
	}
	t.size++
	return nil
}

// root returns the tree's root; the empty tree's is SHA-256 of nothing.
func (t *tree) root() ([]byte, error) {
	if t.size == 0 {
		return hasher.EmptyRoot(), nil
	}
	return t.rng.GetRootHash(nil)
}

// proofHashes fetches the stored nodes a proof needs and folds the
// ephemeral node, giving the RFC 6962 proof.
func proofHashes(tx *bolt.Tx, day, tenant string, nodes proof.Nodes) ([][]byte, error) {
	b := tx.Bucket(bucketNodes)
	hashes := make([][]byte, len(nodes.IDs))
	for i, id := range nodes.IDs {
		v := b.Get(nodeKey(day, tenant, id.Level, id.Index))
		if v == nil {
			return nil, fmt.Errorf("audit log: node (%d, %d) of %s/%s missing", id.Level, id.Index, day, tenant)
		}
		hashes[i] = append([]byte{}, v...)
	}
	out, err := nodes.Rehash(hashes, hasher.HashChildren)
	if err != nil {
		return nil, fmt.Errorf("audit log: proof of %s/%s: %w", day, tenant, err)
	}
	return out, nil
}
