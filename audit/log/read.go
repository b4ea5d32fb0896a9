package log

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/audit/leaf"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// Head returns the latest signed head of a tenant's tree of day.
func (l *Log) Head(tenant, day string) (head.Head, error) {
	if err := checkTree(tenant, day); err != nil {
		return head.Head{}, err
	}
	var h head.Head
	err := l.db.View(func(tx *bolt.Tx) error {
		_, last, ok, err := lastHead(tx, day, tenant)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: no head of %s/%s", ErrNotFound, day, tenant)
		}
		h = last
		return nil
	})
	return h, err
}

// Heads returns every signed head of a tenant's tree of day, oldest first.
func (l *Log) Heads(tenant, day string) ([]head.Head, error) {
	return l.HeadsFrom(tenant, day, 0)
}

// HeadsFrom returns the signed heads of a tenant's tree of day from the
// from-th on (0 is the first), oldest first: what a reader that has seen
// from heads has not.
func (l *Log) HeadsFrom(tenant, day string, from uint64) ([]head.Head, error) {
	heads, _, err := l.HeadsPage(tenant, day, from, 0)
	return heads, err
}

// HeadsPage is HeadsFrom bounded to at most limit heads (0: no bound). next
// is the from of the following page when more heads follow, else 0.
func (l *Log) HeadsPage(tenant, day string, from uint64, limit int) (heads []head.Head, next uint64, err error) {
	if err := checkTree(tenant, day); err != nil {
		return nil, 0, err
	}
	err = l.db.View(func(tx *bolt.Tx) error {
		var err error
		heads, next, err = headsOf(tx, day, tenant, from, limit)
		return err
	})
	return heads, next, err
}

// headsOf reads at most limit (0: all) heads of a tree from the from-th on,
// oldest first, and the from of the heads that follow them (0: none).
func headsOf(tx *bolt.Tx, day, tenant string, from uint64, limit int) ([]head.Head, uint64, error) {
	var out []head.Head
	prefix := tenantPrefix(day, tenant)
	c := tx.Bucket(bucketHeads).Cursor()
	for k, v := c.Seek(headKey(day, tenant, from)); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if limit > 0 && len(out) == limit {
			return out, from + uint64(limit), nil
		}
		h, err := decodeHead(v)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, h)
	}
	return out, 0, nil
}

// Event returns the stored event of a request id, with its bodies unless
// they were pruned.
func (l *Log) Event(requestID string) (Record, error) {
	return l.event("", requestID)
}

// TenantEvent is Event for a tenant: another tenant's event is
// indistinguishable from none (ErrNotFound, with the same message), and its
// bodies are not read.
func (l *Log) TenantEvent(tenant, requestID string) (Record, error) {
	if err := ids.CheckTenant(tenant); err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return l.event(tenant, requestID)
}

// testHookReadBodies, when set, runs after event has found a day's bodies
// not pruned and before it reads them.
var testHookReadBodies func()

// event reads the event of requestID, of tenant when set.
func (l *Log) event(tenant, requestID string) (Record, error) {
	if err := ids.CheckRequest(requestID); err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := l.apply.caughtUp(); err != nil {
		return Record{}, err
	}
	var r Record
	var ev eventRecord
	pruned := false
	err := l.db.View(func(tx *bolt.Tx) error {
		var err error
		r, ev, err = readEvent(tx, requestID)
		if tenant != "" && (errors.Is(err, ErrNotFound) || err == nil && r.Leaf.TenantID != tenant) {
			return fmt.Errorf("%w: no event %s for tenant %s", ErrNotFound, requestID, tenant)
		}
		if err != nil {
			return err
		}
		pruned = tx.Bucket(bucketPruned).Get([]byte(r.Day)) != nil
		return nil
	})
	if err != nil || pruned {
		r.BodiesPruned = pruned
		return r, err
	}
	if testHookReadBodies != nil {
		testHookReadBodies()
	}
	req, resp, err := readBodies(l.journalDir, r.Day, ev)
	if errors.Is(err, fs.ErrNotExist) {
		// Prune marks a day pruned, then removes its journal: it may
		// have done both since the transaction above.
		if err := l.db.View(func(tx *bolt.Tx) error {
			pruned = tx.Bucket(bucketPruned).Get([]byte(r.Day)) != nil
			return nil
		}); err != nil {
			return Record{}, fmt.Errorf("audit log: event %s: %w", requestID, err)
		}
		if pruned {
			r.BodiesPruned = true
			return r, nil
		}
	}
	if err != nil {
		l.opts.Logger.Warn("audit log: bodies cannot be read: damaged or lost", "request_id", requestID, "day", r.Day, "err", err)
		r.BodiesLost = true
		return r, nil
	}
	if leaf.BodyHash(req) != r.Leaf.RequestSHA256 || leaf.BodyHash(resp) != r.Leaf.ResponseSHA256 {
		l.opts.Logger.Warn("audit log: bodies do not match their leaf", "request_id", requestID, "day", r.Day)
		r.BodiesLost = true
		return r, nil
	}
	r.RequestBody, r.ResponseBody = req, resp
	return r, nil
}

// readEvent reads an event's record and leaf.
func readEvent(tx *bolt.Tx, requestID string) (Record, eventRecord, error) {
	key := tx.Bucket(bucketRequests).Get([]byte(requestID))
	if key == nil {
		return Record{}, eventRecord{}, fmt.Errorf("%w: event %s", ErrNotFound, requestID)
	}
	day, seq, err := splitEventKey(key)
	if err != nil {
		return Record{}, eventRecord{}, err
	}
	ev, err := decodeEventRecord(tx.Bucket(bucketEvents).Get(key))
	if err != nil {
		return Record{}, eventRecord{}, fmt.Errorf("audit log: event %s: %w", requestID, err)
	}
	lf, err := leaf.Parse(ev.leaf)
	if err != nil {
		return Record{}, eventRecord{}, fmt.Errorf("audit log: event %s: %w", requestID, err)
	}
	if lf.Sequence != seq || lf.RequestID != requestID {
		return Record{}, eventRecord{}, fmt.Errorf("audit log: event %s stored under %s/%d holds %s/%d", requestID, day, seq, lf.RequestID, lf.Sequence)
	}
	r := Record{Day: day, LeafIndex: ev.leafIndex, Leaf: lf, LeafBytes: ev.leaf, LeafHash: leaf.Hash(ev.leaf)}
	return r, ev, nil
}

// lastHead returns the number and value of a tree's latest head.
func lastHead(tx *bolt.Tx, day, tenant string) (uint64, head.Head, bool, error) {
	prefix := tenantPrefix(day, tenant)
	end := append([]byte(day+tenant), 1) // just past every key with prefix
	c := tx.Bucket(bucketHeads).Cursor()
	k, _ := c.Seek(end)
	var v []byte
	if k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	if k == nil || !bytes.HasPrefix(k, prefix) {
		return 0, head.Head{}, false, nil
	}
	h, err := decodeHead(v)
	return getU64(k[len(prefix):]), h, err == nil, err
}

func decodeHead(v []byte) (head.Head, error) {
	var h head.Head
	if err := json.Unmarshal(v, &h); err != nil {
		return head.Head{}, fmt.Errorf("audit log: stored head: %w", err)
	}
	return h, nil
}

func checkTree(tenant, day string) error {
	if err := ids.CheckTenant(tenant); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if _, err := ids.ParseDay(day); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}
