package forward

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/audit/head"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/central/centralclient"
)

// The queue file's buckets:
//
//	meta     cursor -> oldest day not yet complete; next -> next item id (u64)
//	items    id (u64) -> item JSON, in enqueue order
//	chunks   id (u64), n (u32) -> up to chunkLeaves leaves (see encodeLeaves)
//	trees    tenant 0x00 day -> treeState JSON: what was enqueued of the tree
//	refused  id (u64) -> refusal JSON: items the central plane refused for good
var (
	bucketMeta    = []byte("meta")
	bucketItems   = []byte("items")
	bucketChunks  = []byte("chunks")
	bucketTrees   = []byte("trees")
	bucketRefused = []byte("refused")

	metaCursor = []byte("cursor")
	metaNext   = []byte("next")
)

// chunkLeaves is how many leaves a chunk holds.
const chunkLeaves = 4096

// item is one head to publish with the leaves it adds.
type item struct {
	Head           head.Head `json:"head"`
	FirstLeafIndex uint64    `json:"first_leaf_index"`
	Leaves         uint64    `json:"leaves"`
	Chunks         int       `json:"chunks"`
	Enqueued       time.Time `json:"enqueued"`
	// Format is the chunks' encoding: 0 (items queued before leaves
	// carried their canonical bytes) or chunkWithLeaves.
	Format int `json:"format,omitempty"`
}

// chunkWithLeaves is the chunk format whose leaves carry their canonical
// bytes (encodeLeaves).
const chunkWithLeaves = 2

// treeState is what was enqueued of a source tree: how many of its heads,
// and the last one.
type treeState struct {
	Heads int       `json:"heads"`
	Last  head.Head `json:"last"`
}

// refusal is an item the central plane refused for good.
type refusal struct {
	Item   item      `json:"item"`
	Reason string    `json:"reason"`
	Error  string    `json:"error"`
	At     time.Time `json:"at"`
}

func initQueue(db *bolt.DB) error {
	err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketItems, bucketChunks, bucketTrees, bucketRefused} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("forward: init queue: %w", err)
	}
	return nil
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func chunkKey(id uint64, n int) []byte { return binary.BigEndian.AppendUint32(u64(id), uint32(n)) }

func treeKey(tenant, day string) []byte { return append(append([]byte(tenant), 0), day...) }

// loadTree returns what was enqueued of a tree.
func loadTree(tx *bolt.Tx, tenant, day string) (treeState, error) {
	var st treeState
	v := tx.Bucket(bucketTrees).Get(treeKey(tenant, day))
	if v == nil {
		return st, nil
	}
	if err := json.Unmarshal(v, &st); err != nil {
		return st, fmt.Errorf("forward: tree state of %s/%s: %w", tenant, day, err)
	}
	return st, nil
}

// put enqueues a head with its leaves and records it in its tree's state,
// in one transaction.
func put(tx *bolt.Tx, tenant, day string, st treeState, h head.Head, leaves []auditlog.LeafRef, now time.Time) error {
	meta := tx.Bucket(bucketMeta)
	id := uint64(0)
	if v := meta.Get(metaNext); len(v) == 8 {
		id = binary.BigEndian.Uint64(v)
	}
	it := item{Head: h, FirstLeafIndex: st.Last.EventCount, Leaves: uint64(len(leaves)), Enqueued: now.UTC(), Format: chunkWithLeaves}
	chunks := tx.Bucket(bucketChunks)
	for i := 0; i < len(leaves); i += chunkLeaves {
		if err := chunks.Put(chunkKey(id, it.Chunks), encodeLeaves(leaves[i:min(i+chunkLeaves, len(leaves))])); err != nil {
			return err
		}
		it.Chunks++
	}
	raw, err := json.Marshal(it)
	if err != nil {
		return err
	}
	if err := tx.Bucket(bucketItems).Put(u64(id), raw); err != nil {
		return err
	}
	if err := meta.Put(metaNext, u64(id+1)); err != nil {
		return err
	}
	st.Heads++
	st.Last = h
	rawSt, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketTrees).Put(treeKey(tenant, day), rawSt)
}

// first returns the oldest queued item; ok is false when the queue is
// empty.
func (f *Forwarder) first() (id uint64, it item, leaves []centralclient.Leaf, ok bool, err error) {
	err = f.db.View(func(tx *bolt.Tx) error {
		k, v := tx.Bucket(bucketItems).Cursor().First()
		if k == nil {
			return nil
		}
		ok, id = true, binary.BigEndian.Uint64(k)
		if err := json.Unmarshal(v, &it); err != nil {
			return fmt.Errorf("queued item %d: %w", id, err)
		}
		chunks := tx.Bucket(bucketChunks)
		leaves = make([]centralclient.Leaf, 0, it.Leaves)
		for n := range it.Chunks {
			part, err := decodeLeaves(chunks.Get(chunkKey(id, n)), it.FirstLeafIndex+uint64(len(leaves)), it.Format)
			if err != nil {
				return fmt.Errorf("queued item %d: %w", id, err)
			}
			leaves = append(leaves, part...)
		}
		if uint64(len(leaves)) != it.Leaves {
			return fmt.Errorf("queued item %d holds %d leaves, not %d", id, len(leaves), it.Leaves)
		}
		return nil
	})
	if err != nil {
		err = fmt.Errorf("forward: %w", err)
	}
	return id, it, leaves, ok, err
}

// remove deletes a sent item; with r set, it keeps a record of the refusal.
func (f *Forwarder) remove(id uint64, it item, r *refusal) error {
	err := f.db.Update(func(tx *bolt.Tx) error {
		for n := range it.Chunks {
			if err := tx.Bucket(bucketChunks).Delete(chunkKey(id, n)); err != nil {
				return err
			}
		}
		if r != nil {
			raw, err := json.Marshal(r)
			if err != nil {
				return err
			}
			refused := tx.Bucket(bucketRefused)
			if err := refused.Put(u64(id), raw); err != nil {
				return err
			}
			// Keys are queue ids, in order: the oldest go first. (A write
			// transaction's Stats miss its own puts: counted here.)
			c := refused.Cursor()
			n := 0
			for k, _ := c.First(); k != nil; k, _ = c.Next() {
				n++
			}
			for ; n > f.opts.MaxRefused; n-- {
				if k, _ := c.First(); k == nil {
					break
				}
				if err := c.Delete(); err != nil {
					return err
				}
			}
		}
		return tx.Bucket(bucketItems).Delete(u64(id))
	})
	if err != nil {
		return fmt.Errorf("forward: dequeue item %d: %w", id, err)
	}
	return nil
}

// encodeLeaves is, per leaf: sequence (u64), hash (32), request id length
// (u8), request id, canonical leaf length (u16), canonical leaf (format
// chunkWithLeaves; format 0 ends at the request id); indices follow from
// the item's first leaf index. A leaf beyond centralclient.MaxLeafBytes is
// queued without its bytes (length 0): the central plane keeps its hash,
// and its proof carries no leaf.
func encodeLeaves(leaves []auditlog.LeafRef) []byte {
	out := make([]byte, 0, len(leaves)*(8+32+1+30+2+700))
	for _, l := range leaves {
		out = binary.BigEndian.AppendUint64(out, l.Sequence)
		out = append(out, l.LeafHash...)
		out = append(out, byte(len(l.RequestID)))
		out = append(out, l.RequestID...)
		canon := l.Leaf
		if len(canon) > centralclient.MaxLeafBytes {
			canon = nil
		}
		out = binary.BigEndian.AppendUint16(out, uint16(len(canon)))
		out = append(out, canon...)
	}
	return out
}

func decodeLeaves(v []byte, index uint64, format int) ([]centralclient.Leaf, error) {
	var out []centralclient.Leaf
	for len(v) > 0 {
		if len(v) < 41 || len(v) < 41+int(v[40]) {
			return nil, errors.New("malformed leaf chunk")
		}
		n := 41 + int(v[40])
		l := centralclient.Leaf{
			Sequence: binary.BigEndian.Uint64(v[:8]), LeafHash: append([]byte(nil), v[8:40]...),
			RequestID: string(v[41:n]), LeafIndex: index,
		}
		if format == chunkWithLeaves {
			if len(v) < n+2 || len(v) < n+2+int(binary.BigEndian.Uint16(v[n:])) {
				return nil, errors.New("malformed leaf chunk")
			}
			m := int(binary.BigEndian.Uint16(v[n:]))
			if m > 0 {
				l.Leaf = append([]byte(nil), v[n+2:n+2+m]...)
			}
			n += 2 + m
		}
		out = append(out, l)
		v, index = v[n:], index+1
	}
	return out, nil
}
