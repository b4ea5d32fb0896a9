package log

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// puts collects one bucket's writes of an applier round so that they are
// stored in key order. bbolt keeps a transaction's new keys in each
// node's in-memory list until commit: a key put before others already
// there shifts all of them, so a round of thousands of events put out of
// order (four tenants' leaves and tree nodes interleaved) spent most of
// its time moving memory, quadratic in the round's size.
type puts struct {
	bucket []byte
	name   string // for errors
	// dense: the bucket's keys only grow (per tree), so its pages are
	// filled to 95 % instead of bbolt's half.
	dense bool
	kvs   []kv
}

type kv struct{ k, v []byte }

// newPuts collects writes to bucket, room made for n.
func newPuts(bucket []byte, name string, dense bool, n int) *puts {
	return &puts{bucket: bucket, name: name, dense: dense, kvs: make([]kv, 0, n)}
}

func (p *puts) add(k, v []byte) { p.kvs = append(p.kvs, kv{k, v}) }

// store puts the collected writes into the bucket in key order. A round
// never writes a key twice (sequences, leaf indices and request ids are
// unique), so the order among equal keys does not matter.
func (p *puts) store(tx *bolt.Tx) error {
	b := tx.Bucket(p.bucket)
	if p.dense {
		b.FillPercent = 0.95
	}
	slices.SortFunc(p.kvs, func(x, y kv) int { return bytes.Compare(x.k, y.k) })
	for i, w := range p.kvs {
		if err := b.Put(w.k, w.v); err != nil {
			return fmt.Errorf("audit log: store %s: %w", p.name, err)
		}
		yieldEvery(i)
	}
	return nil
}

// applyYield is how many steps of an applier round (puts, events) run
// between two yields of the processor (yieldEvery).
const applyYield = 256

// yieldEvery lets the requests waiting for a processor run, every
// applyYield steps of a round. A round of ten thousand events is tens of
// milliseconds of CPU in one goroutine; Go preempts a goroutine only after
// 10 ms, and on a machine of two cores the round held one of them, half
// the gateway, for that long at a time: the requests that arrived meanwhile
// waited for it, the tail of the open loop (docs/performance.md). Yielding
// costs the round nothing when no request waits.
func yieldEvery(i int) {
	if i%applyYield == applyYield-1 {
		runtime.Gosched()
	}
}
