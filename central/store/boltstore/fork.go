package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/store"
)

// forkRecord is the value of a fork after its tree key: the refused head's
// document as received, and what it contradicts.
type forkRecord struct {
	Head       json.RawMessage `json:"head"`
	Stored     head.Head       `json:"stored"`
	StoredRoot string          `json:"stored_root"`
	FromNodes  bool            `json:"from_nodes"`
	// ConsistencyProof is store.Fork's, lowercase hex; absent when empty
	// (and in the records kept before it was).
	ConsistencyProof []string  `json:"consistency_proof,omitempty"`
	ReceivedAt       time.Time `json:"received_at"`
}

// forkPrefix is tenant 0, the prefix of a tenant's forks.
func forkPrefix(tenantID string) []byte { return append([]byte(tenantID), 0) }

// RecordFork keeps a fork's evidence once per refused head and tree, at
// most maxPerTree of a tree (store.Store).
func (s *Store) RecordFork(_ context.Context, f store.Fork, maxPerTree int) (bool, error) {
	id := f.Tree()
	digest, raw, err := store.ForkDigest(f.Head)
	if err != nil {
		return false, err
	}
	rec, err := json.Marshal(forkRecord{Head: raw, Stored: f.Stored, StoredRoot: f.StoredRoot, FromNodes: f.FromNodes,
		ConsistencyProof: store.HexHashes(f.ConsistencyProof), ReceivedAt: f.ReceivedAt.UTC()})
	if err != nil {
		return false, fmt.Errorf("boltstore: marshal fork: %w", err)
	}
	recorded := false
	err = s.db.Update(func(tx *bolt.Tx) error {
		key := treeKey(id)
		if tx.Bucket(bucketTrees).Get(key) == nil {
			return fmt.Errorf("%w: tree %s", store.ErrNotFound, id)
		}
		index := tx.Bucket(bucketForkTrees)
		ik := append(bytes.Clone(key), digest[:]...)
		if index.Get(ik) != nil {
			return nil
		}
		if maxPerTree > 0 && countPrefix(index, key, maxPerTree) >= maxPerTree {
			return fmt.Errorf("%w: %s holds %d", store.ErrForkLimit, id, maxPerTree)
		}
		next := tx.Bucket(bucketForkNext)
		var n uint64
		if v := next.Get([]byte(id.TenantID)); len(v) == 8 {
			n = binary.BigEndian.Uint64(v)
		}
		if err := next.Put([]byte(id.TenantID), withU64(nil, n+1)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketForks).Put(withU64(forkPrefix(id.TenantID), n), append(bytes.Clone(key), rec...)); err != nil {
			return err
		}
		recorded = true
		return index.Put(ik, withU64(nil, n))
	})
	if err != nil {
		return false, fmt.Errorf("boltstore: record fork of %s: %w", id, err)
	}
	return recorded, nil
}

// countPrefix counts the keys of b that start with prefix, up to most.
func countPrefix(b *bolt.Bucket, prefix []byte, most int) int {
	n := 0
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && n < most; k, _ = c.Next() {
		n++
	}
	return n
}

// Forks returns a tenant's forks q selects, by number (store.Store). With
// an appliance or a day, the tenant's forks from q.From on are read until
// the page is full: the tree key that starts each value is compared, and
// only the forks selected are decoded.
func (s *Store) Forks(_ context.Context, tenantID string, q store.ForkQuery) ([]store.Fork, error) {
	out := []store.Fork{}
	err := s.db.View(func(tx *bolt.Tx) error {
		prefix := forkPrefix(tenantID)
		c := tx.Bucket(bucketForks).Cursor()
		for k, v := c.Seek(withU64(prefix, q.From)); k != nil && bytes.HasPrefix(k, prefix) && len(k) == len(prefix)+8; k, v = c.Next() {
			if q.Limit > 0 && len(out) == q.Limit {
				break
			}
			id, rec, err := splitFork(v)
			if err != nil {
				return err
			}
			if !q.Selects(id) {
				continue
			}
			f, err := decodeFork(rec)
			if err != nil {
				return err
			}
			f.Number = binary.BigEndian.Uint64(k[len(prefix):])
			out = append(out, f)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: forks of %s: %w", tenantID, err)
	}
	return out, nil
}

// splitFork splits a fork's value into its tree and its record.
func splitFork(v []byte) (store.TreeID, []byte, error) {
	end, zeros := 0, 0
	for end < len(v) && zeros < 3 {
		if v[end] == 0 {
			zeros++
		}
		end++
	}
	if zeros < 3 {
		return store.TreeID{}, nil, fmt.Errorf("malformed fork record")
	}
	id, err := parseTreeKey(v[:end])
	return id, v[end:], err
}

func decodeFork(rec []byte) (store.Fork, error) {
	var r forkRecord
	if err := json.Unmarshal(rec, &r); err != nil {
		return store.Fork{}, fmt.Errorf("stored fork: %w", err)
	}
	f := store.Fork{Stored: r.Stored, StoredRoot: r.StoredRoot, FromNodes: r.FromNodes, ReceivedAt: r.ReceivedAt}
	if err := json.Unmarshal(r.Head, &f.Head); err != nil {
		return store.Fork{}, fmt.Errorf("stored forked head: %w", err)
	}
	for _, h := range r.ConsistencyProof {
		b, err := hex.DecodeString(h)
		if err != nil {
			return store.Fork{}, fmt.Errorf("stored fork's consistency proof: %w", err)
		}
		f.ConsistencyProof = append(f.ConsistencyProof, b)
	}
	return f, nil
}

// deleteForks deletes the forks of a tree (head retention); the tenant's
// next fork number stays, so that no number is given twice.
func deleteForks(tx *bolt.Tx, key []byte, tenantID string) error {
	forks, index := tx.Bucket(bucketForks), tx.Bucket(bucketForkTrees)
	c := index.Cursor()
	for k, v := c.Seek(key); k != nil && bytes.HasPrefix(k, key); k, v = c.Seek(key) {
		if len(v) != 8 {
			return fmt.Errorf("malformed fork index entry %q", k)
		}
		if err := forks.Delete(withU64(forkPrefix(tenantID), binary.BigEndian.Uint64(v))); err != nil {
			return err
		}
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}
