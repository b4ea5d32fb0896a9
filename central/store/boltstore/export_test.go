package boltstore

import (
	"bytes"
	"context"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/central/store"
)

// SetLockTimeout shortens the wait for a locked file for the test.
func SetLockTimeout(t *testing.T, d time.Duration) {
	old := lockTimeout
	lockTimeout = d
	t.Cleanup(func() { lockTimeout = old })
}

// StoredRows counts the leaves, request index entries and nodes the file
// holds for a tree, whatever its reads answer (storetest.RowCounter).
func (s *Store) StoredRows(_ context.Context, id store.TreeID) (int, error) {
	n := 0
	err := s.db.View(func(tx *bolt.Tx) error {
		prefix := treeKey(id)
		for _, b := range [][]byte{bucketLeaves, bucketRequests, bucketNodes} {
			c := tx.Bucket(b).Cursor()
			for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
				n++
			}
		}
		return nil
	})
	return n, err
}

// UsedBytes is the size of the pages the file holds data in: its size up
// to the high-water mark, less its free pages.
func (s *Store) UsedBytes() (int64, error) {
	var n int64
	err := s.db.View(func(tx *bolt.Tx) error {
		n = tx.Size() - int64(s.db.Stats().FreePageN)*int64(s.db.Info().PageSize)
		return nil
	})
	return n, err
}
