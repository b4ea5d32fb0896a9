package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/central/store"
)

// Prune deletes trees past head retention, and leaves and nodes past their
// tree's leaf retention. Each tree is deleted in a transaction of its own,
// oldest first, so a long prune does not hold one huge transaction.
func (s *Store) Prune(ctx context.Context, now time.Time) (store.Pruned, error) {
	var out store.Pruned
	for ctx.Err() == nil {
		done, err := s.pruneOne(func(tx *bolt.Tx) ([]byte, bool, error) { return nextExpiredTree(tx, now) }, true)
		if err != nil || done {
			if err != nil {
				return out, err
			}
			break
		}
		out.Trees++
	}
	for ctx.Err() == nil {
		done, err := s.pruneOne(func(tx *bolt.Tx) ([]byte, bool, error) { return nextExpiredLeaves(tx, now) }, false)
		if err != nil || done {
			if err != nil {
				return out, err
			}
			break
		}
		out.LeafTrees++
	}
	return out, ctx.Err()
}

// pruneOne deletes the tree next finds (all of it, or its leaves); done when
// next finds none.
func (s *Store) pruneOne(next func(*bolt.Tx) ([]byte, bool, error), whole bool) (done bool, err error) {
	err = s.db.Update(func(tx *bolt.Tx) error {
		key, ok, err := next(tx)
		if err != nil || !ok {
			done = !ok
			return err
		}
		if whole {
			return deleteTree(tx, key)
		}
		return deleteLeaves(tx, key)
	})
	if err != nil {
		return false, fmt.Errorf("boltstore: prune: %w", err)
	}
	return done, nil
}

// nextExpiredTree returns the oldest tree whose heads passed retention.
func nextExpiredTree(tx *bolt.Tx, now time.Time) ([]byte, bool, error) {
	k, _ := tx.Bucket(bucketDays).Cursor().First()
	if k == nil {
		return nil, false, nil
	}
	i := bytes.IndexByte(k, 0)
	if i < 0 {
		return nil, false, fmt.Errorf("malformed day key %q", k)
	}
	expire, err := store.HeadsExpire(string(k[:i]))
	if err != nil {
		return nil, false, err
	}
	if expire.After(now) {
		return nil, false, nil
	}
	return append([]byte(nil), k[i+1:]...), true, nil
}

// nextExpiredLeaves returns the tree whose leaves expired first, if they
// have.
func nextExpiredLeaves(tx *bolt.Tx, now time.Time) ([]byte, bool, error) {
	k, _ := tx.Bucket(bucketLeafExp).Cursor().First()
	if k == nil {
		return nil, false, nil
	}
	if len(k) < 8 {
		return nil, false, fmt.Errorf("malformed expiry key %q", k)
	}
	if int64(binary.BigEndian.Uint64(k[:8])) > now.Unix() {
		return nil, false, nil
	}
	return append([]byte(nil), k[8:]...), true, nil
}

// deleteTree deletes everything of a tree, its forks included.
func deleteTree(tx *bolt.Tx, key []byte) error {
	id, err := parseTreeKey(key)
	if err != nil {
		return err
	}
	if err := deleteLeaves(tx, key); err != nil {
		return err
	}
	if err := deletePrefix(tx.Bucket(bucketHeads), key); err != nil {
		return err
	}
	if err := deleteForks(tx, key, id.TenantID); err != nil {
		return err
	}
	if err := tx.Bucket(bucketTrees).Delete(key); err != nil {
		return err
	}
	return tx.Bucket(bucketDays).Delete(dayKey(id.Day, key))
}

// deleteLeaves deletes a tree's leaves, request index and nodes, and marks
// it pruned.
func deleteLeaves(tx *bolt.Tx, key []byte) error {
	id, err := parseTreeKey(key)
	if err != nil {
		return err
	}
	v := tx.Bucket(bucketTrees).Get(key)
	if v == nil {
		return nil
	}
	m, err := decodeMeta(v)
	if err != nil {
		return err
	}
	for _, b := range [][]byte{bucketLeaves, bucketRequests, bucketNodes} {
		if err := deletePrefix(tx.Bucket(b), key); err != nil {
			return err
		}
	}
	if !m.pruned {
		expire, err := store.LeavesExpire(id.Day, int(m.retention))
		if err != nil {
			return err
		}
		if err := tx.Bucket(bucketLeafExp).Delete(append(withU64(nil, uint64(expire.Unix())), key...)); err != nil {
			return err
		}
	}
	m.pruned = true
	return tx.Bucket(bucketTrees).Put(key, m.encode())
}

func deletePrefix(b *bolt.Bucket, prefix []byte) error {
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}
