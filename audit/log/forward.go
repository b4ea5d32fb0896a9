package log

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/audit/leaf"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// What the appliance's forwarder to the central plane (audit/forward)
// reads: the days and trees of the log, their heads (Heads), and the leaves
// a head adds: their hashes, request ids, indices and sequences, and their
// canonical bytes (metadata and body hashes, never bodies).

// LeafRef is what the central plane keeps of an event.
type LeafRef struct {
	RequestID string
	Sequence  uint64
	LeafIndex uint64
	// LeafHash is the RFC 6962 leaf hash of the canonical leaf.
	LeafHash []byte
	// Leaf is the canonical leaf (RFC 8785), which hashes to LeafHash.
	Leaf []byte
}

// Retention is how long the log keeps bodies, which the forwarder sends
// the central plane (docs/central.md, "Retention").
func (l *Log) Retention() time.Duration { return l.opts.Retention }

// Days returns, oldest first, the UTC days that have events, from day from
// on ("" for every day).
func (l *Log) Days(from string) ([]string, error) {
	if from != "" {
		if _, err := ids.ParseDay(from); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	if err := l.apply.caughtUp(); err != nil {
		return nil, err
	}
	var out []string
	err := l.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketSeq).Cursor()
		for k, _ := c.Seek([]byte(from)); k != nil; k, _ = c.Next() {
			out = append(out, string(k))
		}
		return nil
	})
	return out, err
}

// Tenants returns, sorted, the tenants with a tree on day.
func (l *Log) Tenants(day string) ([]string, error) {
	if _, err := ids.ParseDay(day); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := l.apply.caughtUp(); err != nil {
		return nil, err
	}
	var out []string
	err := l.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketTrees).Cursor()
		prefix := []byte(day)
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			out = append(out, string(k[len(prefix):]))
		}
		return nil
	})
	return out, err
}

// Leaves returns the leaves of tenant's tree of day whose sequence is in
// (afterSeq, toSeq], in order: the leaves a head of last_sequence toSeq
// adds to one of last_sequence afterSeq. It reads the tree's own leaf index
// (sequence and request id by leaf index) and its level-0 nodes (the leaf
// hashes), so its cost is the tenant's leaves in the range, not the day's
// events.
func (l *Log) Leaves(tenant, day string, afterSeq, toSeq uint64) ([]LeafRef, error) {
	if err := checkTree(tenant, day); err != nil {
		return nil, err
	}
	if err := l.apply.caughtUp(); err != nil {
		return nil, err
	}
	var out []LeafRef
	err := l.db.View(func(tx *bolt.Tx) error {
		t, err := loadTree(tx, day, tenant)
		if err != nil {
			return err
		}
		leaves, nodes, events := tx.Bucket(bucketLeaves), tx.Bucket(bucketNodes), tx.Bucket(bucketEvents)
		seqAt := func(i uint64) (uint64, []byte, error) {
			v := leaves.Get(leafKey(day, tenant, i))
			if len(v) < 8 {
				return 0, nil, fmt.Errorf("audit log: leaf %d of %s/%s not indexed", i, day, tenant)
			}
			return binary.BigEndian.Uint64(v), v[8:], nil
		}
		// Sequences grow with the leaf index: find the first leaf past
		// afterSeq by bisection.
		var searchErr error
		first := uint64(sort.Search(int(t.size), func(i int) bool {
			seq, _, err := seqAt(uint64(i))
			if err != nil && searchErr == nil {
				searchErr = err
			}
			return seq > afterSeq
		}))
		if searchErr != nil {
			return searchErr
		}
		for i := first; i < t.size; i++ {
			seq, id, err := seqAt(i)
			if err != nil {
				return err
			}
			if seq > toSeq {
				break
			}
			hash := nodes.Get(nodeKey(day, tenant, 0, i))
			if len(hash) != 32 {
				return fmt.Errorf("audit log: leaf hash %d of %s/%s missing", i, day, tenant)
			}
			ev, err := decodeEventRecord(events.Get(eventKey(day, seq)))
			if err != nil {
				return fmt.Errorf("audit log: event %d of %s: %w", seq, day, err)
			}
			if !bytes.Equal(leaf.Hash(ev.leaf), hash) {
				return fmt.Errorf("audit log: event %d of %s does not hash to leaf %d of %s's tree", seq, day, i, tenant)
			}
			out = append(out, LeafRef{RequestID: string(id), Sequence: seq, LeafIndex: i, LeafHash: bytes.Clone(hash), Leaf: ev.leaf})
		}
		return nil
	})
	return out, err
}
