// Package responsestore keeps the Responses API's stored responses of one
// appliance on disk (a pipeline.ResponseStore), in a bbolt file of their
// own beside the audit log, so that a response stored with store: true
// can be read, continued (previous_response_id) and deleted after the
// appliance restarts. It keeps each response for the audit log's body
// retention and the whole within a bound in bytes, the oldest dropped
// first; Run sweeps the expired ones away (docs/gateway-api.md).
package responsestore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/tollgate-dev/tollgate/server/pipeline"
)

// FileName is the store's file in the appliance's data directory.
const FileName = "responses.db"

// DefaultSweepInterval is how often Run drops the expired responses.
const DefaultSweepInterval = time.Minute

// lockTimeout bounds the wait for bbolt's file lock: another process
// holding it is an error, not a wait.
const lockTimeout = 5 * time.Second

// Buckets. entries: tenant 0x00 id → the entry (entry.go). order: the
// entry's sequence number (8 bytes, big-endian: oldest first) → its
// expiry, size and key. meta: the total size of the entries.
var (
	bucketEntries = []byte("entries")
	bucketOrder   = []byte("order")
	bucketMeta    = []byte("meta")
	keyBytes      = []byte("bytes")
)

// Options configure a Store.
type Options struct {
	// TTL is how long a response is kept (the audit log's body
	// retention); required.
	TTL time.Duration
	// MaxBytes bounds the responses kept, in pipeline.ResponseSize; 0
	// means pipeline.DefaultResponseStoreBytes.
	MaxBytes int64
	Logger   *slog.Logger // nil means slog.Default()
}

// Store is a pipeline.ResponseStore in a bbolt file. It is safe for
// concurrent use; every Put and Delete is one transaction, durable when
// it returns.
type Store struct {
	db   *bolt.DB
	opts Options
	log  *slog.Logger

	closeOnce sync.Once
	closeErr  error
}

var _ pipeline.ResponseStore = (*Store)(nil)

// Open opens (or creates) the store at path.
func Open(path string, opts Options) (*Store, error) {
	if opts.TTL <= 0 {
		return nil, fmt.Errorf("response store: a positive TTL is required, not %v", opts.TTL)
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = pipeline.DefaultResponseStoreBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout, FreelistType: bolt.FreelistMapType})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("response store: open %s: locked by another process; is another tollgate using this data directory? (bbolt %w)", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("response store: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketEntries, bucketOrder, bucketMeta} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("response store: open %s: %w", path, err)
	}
	return &Store{db: db, opts: opts, log: opts.Logger}, nil
}

// Close closes the file; once the servers that use the store have
// stopped.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("response store: close: %w", err)
		}
	})
	return s.closeErr
}

// Put implements pipeline.ResponseStore: one transaction replaces what
// (tenant, id) held, adds the response, and drops the oldest responses
// until the whole is within the bound, and the expired ones at the front.
func (s *Store) Put(tenant, id string, r pipeline.StoredResponse, now time.Time) error {
	size := pipeline.ResponseSize(r)
	key := entryKey(tenant, id)
	err := s.db.Update(func(tx *bolt.Tx) error {
		t := buckets(tx)
		if err := t.remove(key); err != nil {
			return err
		}
		if size > s.opts.MaxBytes {
			return nil
		}
		if err := t.add(key, r, size, now.Add(s.opts.TTL)); err != nil {
			return err
		}
		return t.evict(s.opts.MaxBytes, now)
	})
	if err != nil {
		return fmt.Errorf("response store: put: %w", err)
	}
	return nil
}

// Get implements pipeline.ResponseStore. An expired response is not
// returned; the sweep removes it.
func (s *Store) Get(tenant, id string, now time.Time) (pipeline.StoredResponse, bool, error) {
	var (
		r  pipeline.StoredResponse
		ok bool
	)
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketEntries).Get(entryKey(tenant, id))
		if v == nil {
			return nil
		}
		e, err := decodeEntry(v)
		if err != nil {
			return err
		}
		if !now.Before(e.expires) {
			return nil
		}
		r, ok = e.resp, true
		return nil
	})
	if err != nil {
		return pipeline.StoredResponse{}, false, fmt.Errorf("response store: get: %w", err)
	}
	return r, ok, nil
}

// Delete implements pipeline.ResponseStore.
func (s *Store) Delete(tenant, id string, now time.Time) (bool, error) {
	key := entryKey(tenant, id)
	var ok bool
	err := s.db.Update(func(tx *bolt.Tx) error {
		t := buckets(tx)
		v := t.entries.Get(key)
		if v == nil {
			return nil
		}
		h, err := decodeHeader(v)
		if err != nil {
			return err
		}
		ok = now.Before(h.expires)
		return t.remove(key)
	})
	if err != nil {
		return false, fmt.Errorf("response store: delete: %w", err)
	}
	return ok, nil
}

// Sweep removes the responses expired at now, and returns how many. It
// looks in a read transaction first, so that a sweep with nothing to do
// writes nothing.
func (s *Store) Sweep(now time.Time) (int, error) {
	var expired [][]byte
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOrder).ForEach(func(_, v []byte) error {
			o, err := decodeOrder(v)
			if err != nil {
				return err
			}
			if !now.Before(o.expires) {
				expired = append(expired, o.key)
			}
			return nil
		})
	})
	if err != nil || len(expired) == 0 {
		return 0, wrap("sweep", err)
	}
	n := 0
	err = s.db.Update(func(tx *bolt.Tx) error {
		t := buckets(tx)
		n = 0
		for _, key := range expired {
			v := t.entries.Get(key)
			if v == nil {
				continue
			}
			h, err := decodeHeader(v)
			if err != nil {
				return err
			}
			if now.Before(h.expires) { // stored again since the look
				continue
			}
			if err := t.remove(key); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, wrap("sweep", err)
	}
	return n, nil
}

// Run sweeps the expired responses every interval (0 means
// DefaultSweepInterval) until ctx ends; a failed sweep is logged and tried
// again at the next.
func (s *Store) Run(ctx context.Context, interval time.Duration, now func() time.Time) error {
	if interval <= 0 {
		interval = DefaultSweepInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if n, err := s.Sweep(now()); err != nil {
			s.log.Error("sweeping expired stored responses failed", "err", err)
		} else if n > 0 {
			s.log.Debug("expired stored responses removed", "count", n)
		}
	}
}

// Stats are what the store holds.
type Stats struct {
	Responses int
	Bytes     int64
}

// Stats returns what the store holds, expired responses not yet swept
// included.
func (s *Store) Stats() (Stats, error) {
	var st Stats
	err := s.db.View(func(tx *bolt.Tx) error {
		st.Responses = tx.Bucket(bucketOrder).Stats().KeyN
		st.Bytes = readBytes(tx.Bucket(bucketMeta))
		return nil
	})
	return st, wrap("stats", err)
}

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("response store: %s: %w", op, err)
}

// tx is the store's buckets in one write transaction.
type tx struct {
	entries, order, meta *bolt.Bucket
}

func buckets(t *bolt.Tx) *tx {
	return &tx{entries: t.Bucket(bucketEntries), order: t.Bucket(bucketOrder), meta: t.Bucket(bucketMeta)}
}

// add stores an entry under the next sequence number.
func (t *tx) add(key []byte, r pipeline.StoredResponse, size int64, expires time.Time) error {
	seq, err := t.order.NextSequence()
	if err != nil {
		return err
	}
	if err := t.entries.Put(key, encodeEntry(entry{seq: seq, expires: expires, size: size, resp: r})); err != nil {
		return err
	}
	if err := t.order.Put(seqKey(seq), encodeOrder(order{expires: expires, size: size, key: key})); err != nil {
		return err
	}
	return t.meta.Put(keyBytes, binary.BigEndian.AppendUint64(nil, uint64(readBytes(t.meta)+size)))
}

// remove deletes the entry under key, if any, and its place in the order.
func (t *tx) remove(key []byte) error {
	v := t.entries.Get(key)
	if v == nil {
		return nil
	}
	h, err := decodeHeader(v)
	if err != nil {
		return err
	}
	if err := t.entries.Delete(key); err != nil {
		return err
	}
	if err := t.order.Delete(seqKey(h.seq)); err != nil {
		return err
	}
	return t.meta.Put(keyBytes, binary.BigEndian.AppendUint64(nil, uint64(max(readBytes(t.meta)-h.size, 0))))
}

// evict drops the oldest entries while the whole is over maxBytes, then
// the expired ones at the front.
func (t *tx) evict(maxBytes int64, now time.Time) error {
	for {
		k, v := t.order.Cursor().First()
		if k == nil {
			return nil
		}
		o, err := decodeOrder(v)
		if err != nil {
			return err
		}
		if readBytes(t.meta) <= maxBytes && now.Before(o.expires) {
			return nil
		}
		k = append([]byte(nil), k...)
		if err := t.remove(o.key); err != nil {
			return err
		}
		// An order key its entry does not name (never written so, but
		// the loop must end whatever the file holds) goes too.
		if err := t.order.Delete(k); err != nil {
			return err
		}
	}
}

func readBytes(meta *bolt.Bucket) int64 {
	v := meta.Get(keyBytes)
	if len(v) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// entryKey is tenant 0x00 id: tenant ids hold no 0x00.
func entryKey(tenant, id string) []byte {
	k := make([]byte, 0, len(tenant)+1+len(id))
	k = append(k, tenant...)
	k = append(k, 0)
	return append(k, id...)
}
