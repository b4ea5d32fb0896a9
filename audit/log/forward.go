package log

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/audit/ids"
	"github.com/tollgate-dev/tollgate/audit/leaf"
)

// What the central plane's forwarder (central/forward) reads: the days and
// trees of the log, their heads (Heads), and the leaves a head adds, as
// leaf hashes with their request id, index and sequence (never bodies or
// leaf contents).

// LeafRef is what the central plane keeps of an event.
type LeafRef struct {
	RequestID string
	Sequence  uint64
	LeafIndex uint64
	// LeafHash is the RFC 6962 leaf hash of the canonical leaf.
	LeafHash []byte
}

// Retention is how long the log keeps bodies; the central plane keeps the
// leaves as long.
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
// adds to one of last_sequence afterSeq.
func (l *Log) Leaves(tenant, day string, afterSeq, toSeq uint64) ([]LeafRef, error) {
	if err := checkTree(tenant, day); err != nil {
		return nil, err
	}
	if err := l.apply.caughtUp(); err != nil {
		return nil, err
	}
	var out []LeafRef
	err := l.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketEvents).Cursor()
		end := eventKey(day, toSeq)
		for k, v := c.Seek(eventKey(day, afterSeq+1)); k != nil && bytes.Compare(k, end) <= 0; k, v = c.Next() {
			_, seq, err := splitEventKey(k)
			if err != nil {
				return err
			}
			ev, err := decodeEventRecord(v)
			if err != nil {
				return err
			}
			var who struct {
				TenantID  string `json:"tenant_id"`
				RequestID string `json:"request_id"`
			}
			if err := json.Unmarshal(ev.leaf, &who); err != nil {
				return fmt.Errorf("audit log: event %s/%d: %w", day, seq, err)
			}
			if who.TenantID != tenant {
				continue
			}
			out = append(out, LeafRef{RequestID: who.RequestID, Sequence: seq, LeafIndex: ev.leafIndex, LeafHash: leaf.Hash(ev.leaf)})
		}
		return nil
	})
	return out, err
}
