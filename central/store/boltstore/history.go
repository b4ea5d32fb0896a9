package boltstore

import (
	"bytes"
	"context"
	"fmt"

	"github.com/transparency-dev/merkle/compact"
	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/store"
)

// HeadsFrom returns a tree's heads numbered from on, at most limit of
// them (store.Store): one cursor from the key of head from.
func (s *Store) HeadsFrom(_ context.Context, id store.TreeID, from, limit int) ([]head.Head, error) {
	out := []head.Head{}
	if from < 0 {
		from = 0
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		prefix := treeKey(id)
		c := tx.Bucket(bucketHeads).Cursor()
		for k, v := c.Seek(withU64(prefix, uint64(from))); k != nil && bytes.HasPrefix(k, prefix) && len(k) == len(prefix)+8; k, v = c.Next() {
			if limit > 0 && len(out) == limit {
				break
			}
			h, err := decodeHead(v)
			if err != nil {
				return err
			}
			out = append(out, h)
		}
		return nil
	})
	return out, err
}

// Consistency reads two heads of a tree and the consistency proof between
// them in one transaction (store.Store).
func (s *Store) Consistency(_ context.Context, id store.TreeID, from, to uint64) (store.Consistency, error) {
	var out store.Consistency
	err := s.db.View(func(tx *bolt.Tx) error {
		key := treeKey(id)
		t, err := s.readTree(tx, key)
		if err != nil {
			return err
		}
		heads := tx.Bucket(bucketHeads)
		at := func(n int) (head.Head, error) {
			v := heads.Get(withU64(key, uint64(n)))
			if v == nil {
				return head.Head{}, fmt.Errorf("boltstore: head %d of tree %q missing", n, key)
			}
			return decodeHead(v)
		}
		nodes := func(ids []compact.NodeID) ([][]byte, error) { return readNodes(tx, key, ids) }
		out, err = store.ReadConsistency(t.Head, t.Heads, t.LeavesPruned, from, to, at, nodes)
		if err != nil {
			return fmt.Errorf("boltstore: consistency of %s: %w", id, err)
		}
		return nil
	})
	return out, err
}
