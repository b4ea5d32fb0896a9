package log

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// snapshot is a tree's state at one size, read in one transaction.
type snapshot struct {
	day, tenant   string
	size, lastSeq uint64
	root          []byte
}

// SignHeads publishes heads as of now. It first closes and finalizes every
// day before now's UTC day (see FinalizeDay), then signs a head for each tree
// of the open day that grew since its last head. It returns the heads it
// signed, final ones first.
//
// A tree of a day after now's UTC day (the clock jumped ahead for an append,
// then back: the open day never moves back) cannot be signed yet, a head
// being never signed before its day: SignHeads skips it, with a warning, and
// signs the others; it is signed once the clock reaches its day.
func (l *Log) SignHeads(now time.Time) ([]head.Head, error) {
	if l.opts.Signer == nil {
		return nil, ErrNoSigner
	}
	l.headMu.Lock()
	defer l.headMu.Unlock()
	signed, err := l.finalizeClosed(now, "")
	if err != nil {
		return signed, err
	}
	var snaps []snapshot
	err = l.db.View(func(tx *bolt.Tx) error {
		for _, day := range unfinalizedDays(tx) {
			s, err := snapshots(tx, day, true)
			if err != nil {
				return err
			}
			snaps = append(snaps, s...)
		}
		return nil
	})
	if err != nil {
		return signed, fmt.Errorf("audit log: read trees: %w", err)
	}
	snaps = l.skipAhead(snaps, now)
	heads, err := l.signAndStore(snaps, now, "")
	return append(signed, heads...), err
}

// skipAhead returns the snapshots of days not after now's UTC day. It logs
// one warning for the trees of later days it leaves to a later call, naming
// the first (day and tenant) and all of them.
func (l *Log) skipAhead(snaps []snapshot, now time.Time) []snapshot {
	today := ids.Day(now)
	kept := make([]snapshot, 0, len(snaps))
	var ahead []string
	var first snapshot
	for _, s := range snaps {
		if s.day <= today {
			kept = append(kept, s)
			continue
		}
		if ahead == nil {
			first = s
		}
		ahead = append(ahead, s.day+"/"+s.tenant)
	}
	if ahead != nil {
		l.opts.Logger.Warn("audit log: tree of a day ahead of the clock left unsigned until the clock reaches its day",
			"day", first.day, "tenant", first.tenant, "now", head.FormatSignedAt(now), "trees", ahead)
	}
	return kept
}

// FinalizeDay closes day (no event joins it afterwards) and signs a final
// head for each of its trees, signed_at being after the day's end, after
// finalizing any earlier day not yet final (days are finalized in order); it
// is a no-op for a day already finalized. It fails with ErrDayOpen while now
// is still within day or before it.
func (l *Log) FinalizeDay(day string, now time.Time) ([]head.Head, error) {
	if l.opts.Signer == nil {
		return nil, ErrNoSigner
	}
	if _, err := ids.ParseDay(day); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if ids.Day(now) <= day {
		return nil, fmt.Errorf("%w: %s at %s", ErrDayOpen, day, now.UTC().Format(time.RFC3339))
	}
	l.headMu.Lock()
	defer l.headMu.Unlock()
	return l.finalizeClosed(now, day)
}

// finalizeClosed closes the days before now's day and finalizes, oldest
// first, every one not yet final, up to last when set. Caller holds headMu.
func (l *Log) finalizeClosed(now time.Time, last string) ([]head.Head, error) {
	if err := l.closeDays(now); err != nil {
		return nil, err
	}
	today := ids.Day(now)
	var days []string
	if err := l.db.View(func(tx *bolt.Tx) error {
		days = unfinalizedDays(tx)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("audit log: read days: %w", err)
	}
	var out []head.Head
	for _, day := range days {
		if day >= today || (last != "" && day > last) {
			break
		}
		heads, err := l.finalize(day, now)
		out = append(out, heads...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// closeDays advances the open day to now's day, so that no later append
// joins an earlier day, and waits until audit.db holds every event
// journaled until then.
func (l *Log) closeDays(now time.Time) error {
	l.writeMu.Lock()
	err := l.advanceTo(ids.Day(now))
	l.writeMu.Unlock()
	if err != nil {
		return err
	}
	return l.apply.caughtUp()
}

// finalize signs the final heads of a closed day and marks it final in the
// same transaction. A tree whose last head is already final at its size
// (a retry after a crash) gets no second one. Caller holds headMu.
func (l *Log) finalize(day string, now time.Time) ([]head.Head, error) {
	var snaps []snapshot
	done := false
	err := l.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketFinal).Get([]byte(day)) != nil {
			done = true
			return nil
		}
		var err error
		snaps, err = snapshots(tx, day, false)
		return err
	})
	if err != nil || done {
		return nil, err
	}
	heads, err := l.signAndStore(snaps, now, day)
	if err == nil {
		l.opts.Logger.Info("audit log: day finalized", "day", day, "trees", len(heads))
	}
	return heads, err
}

// snapshots reads the trees of day: all of them, or only those that grew
// since their last head, skipping trees whose last head is final already.
func snapshots(tx *bolt.Tx, day string, onlyGrown bool) ([]snapshot, error) {
	var out []snapshot
	c := tx.Bucket(bucketTrees).Cursor()
	prefix := []byte(day)
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		tenant := string(k[len(prefix):])
		t, err := decodeTree(day, tenant, v)
		if err != nil {
			return nil, err
		}
		_, last, ok, err := lastHead(tx, day, tenant)
		if err != nil {
			return nil, err
		}
		if ok && last.EventCount == t.size && (onlyGrown || last.Final()) {
			continue
		}
		root, err := t.root()
		if err != nil {
			return nil, fmt.Errorf("audit log: root of %s/%s: %w", day, tenant, err)
		}
		out = append(out, snapshot{day: day, tenant: tenant, size: t.size, lastSeq: t.lastSeq, root: root})
	}
	return out, nil
}

// signAndStore signs a head per snapshot at now and stores them in one
// transaction, marking finalDay final in it when set. Caller holds headMu.
func (l *Log) signAndStore(snaps []snapshot, now time.Time, finalDay string) ([]head.Head, error) {
	heads := make([]head.Head, 0, len(snaps))
	for _, s := range snaps {
		h, err := head.Sign(head.Head{
			TenantID: s.tenant, Day: s.day, EventCount: s.size, LastSequence: s.lastSeq,
			MerkleRoot: hex.EncodeToString(s.root),
		}, l.opts.Signer, now)
		if err != nil {
			return nil, fmt.Errorf("audit log: sign head of %s/%s: %w", s.day, s.tenant, err)
		}
		heads = append(heads, h)
	}
	if len(heads) == 0 && finalDay == "" {
		return nil, nil
	}
	err := l.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketHeads)
		for _, h := range heads {
			n, _, ok, err := lastHead(tx, h.Day, h.TenantID)
			if err != nil {
				return err
			}
			if ok {
				n++
			}
			raw, err := json.Marshal(h)
			if err != nil {
				return fmt.Errorf("marshal head: %w", err)
			}
			if err := b.Put(headKey(h.Day, h.TenantID, n), raw); err != nil {
				return fmt.Errorf("store head: %w", err)
			}
		}
		if finalDay == "" {
			return nil
		}
		return tx.Bucket(bucketFinal).Put([]byte(finalDay), []byte(head.FormatSignedAt(now)))
	})
	if err != nil {
		return nil, fmt.Errorf("audit log: store heads: %w", err)
	}
	return heads, nil
}

// unfinalizedDays returns, oldest first, the days with events that are not
// final, scanning back from the newest day to the first final one (days are
// finalized in order).
func unfinalizedDays(tx *bolt.Tx) []string {
	final := tx.Bucket(bucketFinal)
	var days []string
	c := tx.Bucket(bucketSeq).Cursor()
	for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
		if final.Get(k) != nil {
			break
		}
		days = append([]string{string(k)}, days...)
	}
	return days
}
