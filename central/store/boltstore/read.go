package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/transparency-dev/merkle/compact"
	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/store"
)

// Tree returns a tree's state.
func (s *Store) Tree(_ context.Context, id store.TreeID) (store.Tree, error) {
	var out store.Tree
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = s.readTree(tx, treeKey(id))
		return err
	})
	return out, err
}

// readTree reads a tree's meta and latest head.
func (s *Store) readTree(tx *bolt.Tx, key []byte) (store.Tree, error) {
	v := tx.Bucket(bucketTrees).Get(key)
	if v == nil {
		return store.Tree{}, fmt.Errorf("%w: tree %q", store.ErrNotFound, key)
	}
	m, err := decodeMeta(v)
	if err != nil {
		return store.Tree{}, err
	}
	if m.heads == 0 {
		return store.Tree{}, fmt.Errorf("boltstore: tree %q without heads", key)
	}
	h, err := s.latestHead(tx, key, m.heads-1)
	if err != nil {
		return store.Tree{}, err
	}
	return store.Tree{Head: h, Heads: int(m.heads), LeafRetentionDays: int(m.retention), LeavesPruned: m.pruned}, nil
}

// latestHead reads head n of a tree, its latest, through the cache of
// decoded latest heads: every proof and heads request reads one.
func (s *Store) latestHead(tx *bolt.Tx, tree []byte, n uint64) (head.Head, error) {
	v := tx.Bucket(bucketHeads).Get(withU64(tree, n))
	if v == nil {
		return head.Head{}, fmt.Errorf("boltstore: head %d of tree %q missing", n, tree)
	}
	if h, ok := s.heads.get(tree, v); ok {
		return h, nil
	}
	h, err := decodeHead(v)
	if err == nil {
		s.heads.put(tree, v, h)
	}
	return h, err
}

func decodeHead(v []byte) (head.Head, error) {
	var h head.Head
	if err := json.Unmarshal(v, &h); err != nil {
		return head.Head{}, fmt.Errorf("boltstore: stored head: %w", err)
	}
	return h, nil
}

// HeadAt returns a tree's n-th head.
func (s *Store) HeadAt(_ context.Context, id store.TreeID, n int) (head.Head, error) {
	if n < 0 {
		return head.Head{}, fmt.Errorf("%w: head %d of %s", store.ErrNotFound, n, id)
	}
	var out head.Head
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketHeads).Get(withU64(treeKey(id), uint64(n)))
		if v == nil {
			return fmt.Errorf("%w: head %d of %s", store.ErrNotFound, n, id)
		}
		var err error
		out, err = decodeHead(v)
		return err
	})
	return out, err
}

// Heads returns every head of a tree, oldest first.
func (s *Store) Heads(_ context.Context, id store.TreeID) ([]head.Head, error) {
	out := []head.Head{}
	err := s.db.View(func(tx *bolt.Tx) error {
		prefix := treeKey(id)
		c := tx.Bucket(bucketHeads).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
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

// Nodes returns stored node hashes.
func (s *Store) Nodes(_ context.Context, id store.TreeID, ids []compact.NodeID) ([][]byte, error) {
	var out [][]byte
	err := s.db.View(func(tx *bolt.Tx) error {
		key := treeKey(id)
		if err := checkLeaves(tx, key); err != nil {
			return err
		}
		var err error
		out, err = readNodes(tx, key, ids)
		return err
	})
	return out, err
}

// checkLeaves fails with ErrNotFound for an unknown tree and ErrPruned for
// a pruned one.
func checkLeaves(tx *bolt.Tx, key []byte) error {
	v := tx.Bucket(bucketTrees).Get(key)
	if v == nil {
		return fmt.Errorf("%w: tree %q", store.ErrNotFound, key)
	}
	m, err := decodeMeta(v)
	if err != nil {
		return err
	}
	if m.pruned {
		return fmt.Errorf("%w: tree %q", store.ErrPruned, key)
	}
	return nil
}

// readNodes reads node hashes with one cursor (it keeps its search stack)
// and copies them into one allocation.
func readNodes(tx *bolt.Tx, tree []byte, ids []compact.NodeID) ([][]byte, error) {
	c := tx.Bucket(bucketNodes).Cursor()
	out := make([][]byte, len(ids))
	buf := make([]byte, 0, 32*len(ids))
	key := make([]byte, len(tree), len(tree)+9)
	copy(key, tree)
	for i, id := range ids {
		key = binary.BigEndian.AppendUint64(append(key[:len(tree)], byte(id.Level)), id.Index)
		k, v := c.Seek(key)
		if v == nil || !bytes.Equal(k, key) {
			return nil, fmt.Errorf("%w: node (%d, %d) of tree %q", store.ErrNotFound, id.Level, id.Index, tree)
		}
		start := len(buf)
		buf = append(buf, v...)
		out[i] = buf[start:len(buf):len(buf)]
	}
	return out, nil
}

// Leaves returns stored leaves [from, to).
func (s *Store) Leaves(_ context.Context, id store.TreeID, from, to uint64) ([]store.Leaf, error) {
	var out []store.Leaf
	err := s.db.View(func(tx *bolt.Tx) error {
		key := treeKey(id)
		if err := checkLeaves(tx, key); err != nil {
			return err
		}
		c := tx.Bucket(bucketLeaves).Cursor()
		for k, v := c.Seek(withU64(key, from)); k != nil && bytes.HasPrefix(k, key) && len(k) == len(key)+8; k, v = c.Next() {
			index := binary.BigEndian.Uint64(k[len(key):])
			if index >= to {
				break
			}
			l, err := decodeLeaf(index, v)
			if err != nil {
				return err
			}
			out = append(out, l)
		}
		return nil
	})
	return out, err
}

// Proof reads a request's leaf, the latest head and the audit path.
func (s *Store) Proof(_ context.Context, id store.TreeID, requestID string) (store.Proof, error) {
	var out store.Proof
	err := s.db.View(func(tx *bolt.Tx) error {
		key := treeKey(id)
		t, err := s.readTree(tx, key)
		if err != nil {
			return err
		}
		if t.LeavesPruned {
			return fmt.Errorf("%w: tree %q", store.ErrPruned, key)
		}
		iv := tx.Bucket(bucketRequests).Get(requestKey(key, requestID))
		if len(iv) != 8 {
			return fmt.Errorf("%w: request %s in tree %q", store.ErrNotFound, requestID, key)
		}
		index := binary.BigEndian.Uint64(iv)
		lv := tx.Bucket(bucketLeaves).Get(withU64(key, index))
		if lv == nil {
			return fmt.Errorf("boltstore: leaf %d of tree %q missing", index, key)
		}
		l, err := decodeLeaf(index, lv)
		if err != nil {
			return err
		}
		hashes, err := store.InclusionHashes(index, t.Head.EventCount, func(ids []compact.NodeID) ([][]byte, error) {
			return readNodes(tx, key, ids)
		})
		if err != nil {
			return err
		}
		out = store.Proof{Head: t.Head, Leaf: l, Hashes: hashes}
		return nil
	})
	return out, err
}

// LatestHeads returns the latest head of each appliance of a tenant's day
// after the appliance id after, at most limit of them (store.Store). Tree
// keys end with the appliance id and a 0 byte, which no id holds, so key
// order is appliance id order and the cursor starts at after's key.
func (s *Store) LatestHeads(_ context.Context, tenantID, day, after string, limit int) ([]head.Head, error) {
	out := []head.Head{}
	err := s.db.View(func(tx *bolt.Tx) error {
		prefix := dayPrefix(tenantID, day)
		start := prefix
		if after != "" {
			start = treeKey(store.TreeID{TenantID: tenantID, Day: day, ApplianceID: after})
		}
		c := tx.Bucket(bucketTrees).Cursor()
		for k, _ := c.Seek(start); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			if after != "" && bytes.Equal(k, start) {
				continue
			}
			if limit > 0 && len(out) == limit {
				break
			}
			t, err := s.readTree(tx, k)
			if err != nil {
				return err
			}
			out = append(out, t.Head)
		}
		return nil
	})
	return out, err
}
