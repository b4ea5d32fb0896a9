package log

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// Prune deletes the journal file, and with it the bodies, of every day that
// ended at least the retention period before now; leaves, trees and heads
// are kept in audit.db. A day is marked pruned before its file goes, so a
// crash in between only leaves a file that the next Prune deletes. It
// returns the days it pruned.
func (l *Log) Prune(now time.Time) ([]string, error) {
	// A day D is past retention when its end, the start of D+1, is no later
	// than now-retention: exactly the days before the UTC day of that instant.
	cutoff := ids.Day(now.Add(-l.opts.Retention))
	// Close the days before now's (the journal being written is never
	// past retention), and have everything journaled in audit.db before
	// a journal goes.
	if err := l.closeDays(now); err != nil {
		return nil, err
	}
	dir := l.journalDir
	days, err := journalDays(dir)
	if err != nil {
		return nil, err
	}
	var pruned []string
	for _, day := range days {
		if day >= cutoff {
			break
		}
		err := l.db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketPruned).Put([]byte(day), []byte(head.FormatSignedAt(now)))
		})
		if err != nil {
			return pruned, fmt.Errorf("audit log: mark %s pruned: %w", day, err)
		}
		if err := os.Remove(journalPath(dir, day)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return pruned, fmt.Errorf("audit log: prune bodies of %s: %w", day, err)
		}
		torn, _ := filepath.Glob(journalPath(dir, day) + ".torn-*") // see cutTornTail
		for _, path := range torn {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return pruned, fmt.Errorf("audit log: prune %s: %w", path, err)
			}
		}
		pruned = append(pruned, day)
	}
	if len(pruned) > 0 {
		l.opts.Logger.Info("audit log: pruned bodies", "days", pruned, "retention", l.opts.Retention.String())
	}
	return pruned, nil
}
