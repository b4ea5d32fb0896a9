package boltstore

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/tollgate-dev/tollgate/central/store"
)

// treeKey is tenant 0 day 0 appliance 0: no identifier holds 0x00, so a
// tree's key range never holds another tree's keys.
func treeKey(id store.TreeID) []byte {
	k := make([]byte, 0, len(id.TenantID)+len(id.Day)+len(id.ApplianceID)+3)
	k = append(append(k, id.TenantID...), 0)
	k = append(append(k, id.Day...), 0)
	return append(append(k, id.ApplianceID...), 0)
}

// dayPrefix is tenant 0 day 0, the prefix of a tenant's trees of a day.
func dayPrefix(tenantID, day string) []byte {
	return append(append(append([]byte(tenantID), 0), day...), 0)
}

// parseTreeKey is the inverse of treeKey.
func parseTreeKey(k []byte) (store.TreeID, error) {
	var parts [3]string
	start, n := 0, 0
	for i, b := range k {
		if b != 0 {
			continue
		}
		if n == 3 {
			break
		}
		parts[n] = string(k[start:i])
		n, start = n+1, i+1
	}
	if n != 3 || start != len(k) {
		return store.TreeID{}, fmt.Errorf("boltstore: malformed tree key %q", k)
	}
	return store.TreeID{TenantID: parts[0], Day: parts[1], ApplianceID: parts[2]}, nil
}

func withU64(prefix []byte, v uint64) []byte {
	k := make([]byte, len(prefix), len(prefix)+8)
	copy(k, prefix)
	return binary.BigEndian.AppendUint64(k, v)
}

func nodeKey(tree []byte, level uint, index uint64) []byte {
	k := make([]byte, len(tree), len(tree)+9)
	copy(k, tree)
	k = append(k, byte(level))
	return binary.BigEndian.AppendUint64(k, index)
}

func requestKey(tree []byte, requestID string) []byte {
	k := make([]byte, len(tree), len(tree)+len(requestID))
	copy(k, tree)
	return append(k, requestID...)
}

// dayKey is day 0 tree, the days index.
func dayKey(day string, tree []byte) []byte {
	return append(append([]byte(day), 0), tree...)
}

// meta is the value of a tree.
type meta struct {
	heads     uint64
	retention uint32
	pruned    bool
}

const metaVersion = 1

func (m meta) encode() []byte {
	out := []byte{metaVersion}
	out = binary.BigEndian.AppendUint64(out, m.heads)
	out = binary.BigEndian.AppendUint32(out, m.retention)
	if m.pruned {
		return append(out, 1)
	}
	return append(out, 0)
}

func decodeMeta(v []byte) (meta, error) {
	if len(v) != 14 || v[0] != metaVersion {
		return meta{}, fmt.Errorf("boltstore: malformed tree record")
	}
	return meta{heads: binary.BigEndian.Uint64(v[1:9]), retention: binary.BigEndian.Uint32(v[9:13]), pruned: v[13] == 1}, nil
}

// encodeLeaf is sequence, hash, request id, then the canonical leaf when
// the appliance sent it. The leaf is a JSON object, so it starts with '{',
// which no request id holds: records stored before leaves carried their
// bytes (sequence, hash, request id) read as leaves without them.
func encodeLeaf(l store.Leaf) []byte {
	out := make([]byte, 0, 8+32+len(l.RequestID)+len(l.Leaf))
	out = binary.BigEndian.AppendUint64(out, l.Sequence)
	out = append(out, l.LeafHash...)
	out = append(out, l.RequestID...)
	return append(out, l.Leaf...)
}

func decodeLeaf(index uint64, v []byte) (store.Leaf, error) {
	if len(v) <= 40 {
		return store.Leaf{}, fmt.Errorf("boltstore: malformed leaf record")
	}
	l := store.Leaf{
		LeafIndex: index, Sequence: binary.BigEndian.Uint64(v[:8]),
		LeafHash: append([]byte(nil), v[8:40]...),
	}
	rest := v[40:]
	if i := bytes.IndexByte(rest, '{'); i >= 0 {
		l.Leaf = append([]byte(nil), rest[i:]...)
		rest = rest[:i]
	}
	if len(rest) == 0 {
		return store.Leaf{}, fmt.Errorf("boltstore: malformed leaf record")
	}
	l.RequestID = string(rest)
	return l, nil
}
