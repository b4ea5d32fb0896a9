// Package boltstore is the embedded store of the central plane: one bbolt
// file, for `tollgate dev` and small sites. Layout (keys start with the
// tree key tenant 0x00 day 0x00 appliance 0x00, so a tree is one key range;
// integers are big-endian):
//
//	trees    tree                      -> version, heads (u64), leaf retention days (u32), pruned (u8)
//	heads    tree, n (u64)             -> head JSON, n = 0, 1, ... in commit order
//	leaves   tree, leaf index (u64)    -> sequence (u64), leaf hash (32), request id
//	requests tree, request id          -> leaf index (u64)
//	nodes    tree, level (u8), index   -> hash of a complete subtree
//	days     day 0x00 tree             -> (empty) trees by day, for head retention
//	leafexp  expiry (u64 unix s), tree -> (empty) trees whose leaves are kept until expiry
//	forks    tenant 0x00, n (u64)      -> tree, fork JSON; a tenant's forks, n = 0, 1, ... as recorded
//	forktrees tree, SHA-256 of the refused head -> n (u64): a tree's forks, each refused head once
//	forknext tenant                    -> the tenant's next fork number (u64), never reused
package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/tollgate-dev/tollgate/central/store"
)

var (
	bucketTrees    = []byte("trees")
	bucketHeads    = []byte("heads")
	bucketLeaves   = []byte("leaves")
	bucketRequests = []byte("requests")
	bucketNodes    = []byte("nodes")
	bucketDays     = []byte("days")
	bucketLeafExp  = []byte("leafexp")
	bucketMeta     = []byte("meta")
	// Added without a new format: a file of the first layout gets them
	// empty on open.
	bucketForks     = []byte("forks")
	bucketForkTrees = []byte("forktrees")
	bucketForkNext  = []byte("forknext")

	allBuckets = [][]byte{bucketTrees, bucketHeads, bucketLeaves, bucketRequests,
		bucketNodes, bucketDays, bucketLeafExp, bucketMeta, bucketForks, bucketForkTrees, bucketForkNext}

	metaFormat = []byte("format")
)

// formatVersion is stored in meta/format; a file of another format is refused.
const formatVersion = "tollgate-central-bbolt/v1"

// Store is a store.Store in a bbolt file.
type Store struct {
	db    *bolt.DB
	heads headCache
}

var _ store.Store = (*Store)(nil)

// lockTimeout bounds the wait for the file's lock, held by another process
// that has the file open.
var lockTimeout = 5 * time.Second

// Open opens (creating if needed) the store file at path.
func Open(path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("boltstore: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:      lockTimeout, // another process holds the file
		FreelistType: bolt.FreelistMapType,
		// Address space only; avoids remaps (which stall readers) as the
		// file grows.
		InitialMmapSize: 1 << 30,
	})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("boltstore: open %s: the file is locked by another process; is another tollgate using this data directory? (bbolt %w)", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		switch got := meta.Get(metaFormat); {
		case got == nil:
			return meta.Put(metaFormat, []byte(formatVersion))
		case string(got) != formatVersion:
			return fmt.Errorf("format %q, not %q", got, formatVersion)
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("boltstore: init %s: %w", path, err)
	}
	return &Store{db: db, heads: headCache{m: map[string]cachedHead{}}}, nil
}

// Ping answers nil while the file is open: an embedded store has no
// database to lose. A closed store answers bbolt's error.
func (s *Store) Ping(context.Context) error {
	if err := s.db.View(func(*bolt.Tx) error { return nil }); err != nil {
		return fmt.Errorf("boltstore: ping: %w", err)
	}
	return nil
}

// Close closes the file.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("boltstore: close: %w", err)
	}
	return nil
}
