package boltstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/central/store"
)

// Commit stores a verified head with its leaves and nodes in one
// transaction; ErrPruned if the tree's leaves were pruned.
func (s *Store) Commit(_ context.Context, c store.Commit) error {
	id := store.TreeOf(c.Head)
	raw, err := json.Marshal(c.Head)
	if err != nil {
		return fmt.Errorf("boltstore: marshal head: %w", err)
	}
	expire, err := store.LeavesExpire(id.Day, c.LeafRetentionDays)
	if err != nil {
		return err
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		key := treeKey(id)
		trees := tx.Bucket(bucketTrees)
		var m meta
		old := trees.Get(key)
		if old != nil {
			if m, err = decodeMeta(old); err != nil {
				return err
			}
		}
		if m.pruned {
			// Pruned since the caller read it: the leaves would go into a
			// tree no prune visits again.
			return fmt.Errorf("%w: %s", store.ErrPruned, id)
		}
		if m.heads != uint64(c.PrevHeads) {
			return fmt.Errorf("%w: %s has %d heads, not %d", store.ErrConflict, id, m.heads, c.PrevHeads)
		}
		if err := putLeaves(tx, key, id, c); err != nil {
			return err
		}
		if err := tx.Bucket(bucketHeads).Put(withU64(key, m.heads), raw); err != nil {
			return err
		}
		if old != nil {
			if oldExp, err := store.LeavesExpire(id.Day, int(m.retention)); err == nil {
				if err := tx.Bucket(bucketLeafExp).Delete(append(withU64(nil, uint64(oldExp.Unix())), key...)); err != nil {
					return err
				}
			}
		}
		if err := tx.Bucket(bucketLeafExp).Put(append(withU64(nil, uint64(expire.Unix())), key...), nil); err != nil {
			return err
		}
		m.heads++
		m.retention = uint32(c.LeafRetentionDays)
		if err := trees.Put(key, m.encode()); err != nil {
			return err
		}
		return tx.Bucket(bucketDays).Put(dayKey(id.Day, key), nil)
	})
	if err != nil {
		return fmt.Errorf("boltstore: commit head of %s: %w", id, err)
	}
	return nil
}

// putLeaves stores the new leaves, their request index and the nodes. Each
// bucket's keys are put in key order: bbolt inserts into in-memory nodes
// that split only at commit, so unsorted inserts into one large
// transaction cost quadratic time.
func putLeaves(tx *bolt.Tx, key []byte, id store.TreeID, c store.Commit) error {
	leaves, requests, nodes := tx.Bucket(bucketLeaves), tx.Bucket(bucketRequests), tx.Bucket(bucketNodes)
	// A tree's leaves and each level of its nodes only grow at the end of
	// their key range, so a page that splits is never written again: fill
	// it (bbolt's default, half, left leaf records, which carry the
	// canonical leaf, taking twice their size). Request ids are random:
	// their bucket keeps the default.
	leaves.FillPercent, nodes.FillPercent = 0.95, 0.95
	reqs := make([]kv, 0, len(c.Leaves))
	for _, l := range c.Leaves {
		if len(l.LeafHash) != 32 {
			return fmt.Errorf("leaf %d: hash of %d bytes", l.LeafIndex, len(l.LeafHash))
		}
		rk := requestKey(key, l.RequestID)
		if requests.Get(rk) != nil {
			return fmt.Errorf("%w: %s in %s", store.ErrDuplicateRequest, l.RequestID, id)
		}
		reqs = append(reqs, kv{rk, withU64(nil, l.LeafIndex)})
	}
	if err := putSorted(requests, reqs); err != nil {
		return fmt.Errorf("%w: %s", err, id)
	}
	for _, l := range c.Leaves { // leaf indices ascend: already in key order
		if err := leaves.Put(withU64(key, l.LeafIndex), encodeLeaf(l)); err != nil {
			return err
		}
	}
	ns := make([]kv, len(c.Nodes))
	for i, n := range c.Nodes {
		ns[i] = kv{nodeKey(key, n.ID.Level, n.ID.Index), n.Hash}
	}
	return putSorted(nodes, ns)
}

type kv struct{ k, v []byte }

// putSorted puts pairs in key order; a key given twice is a duplicate
// request (the only bucket where the caller's keys can repeat).
func putSorted(b *bolt.Bucket, pairs []kv) error {
	slices.SortFunc(pairs, func(x, y kv) int { return bytes.Compare(x.k, y.k) })
	for i, p := range pairs {
		if i > 0 && bytes.Equal(p.k, pairs[i-1].k) {
			return fmt.Errorf("%w: %q twice", store.ErrDuplicateRequest, p.k)
		}
		if err := b.Put(p.k, p.v); err != nil {
			return err
		}
	}
	return nil
}
