package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// afterPruneScan, when set, runs between Prune's scan for expired leaves
// and their deletion (tests).
var afterPruneScan func()

// Prune deletes trees past head retention, their forks with them, and the
// leaves and nodes of trees past their leaf retention, a tree per
// transaction.
func (s *Store) Prune(ctx context.Context, now time.Time) (store.Pruned, error) {
	var out store.Pruned
	// Days up to a day after the cutoff are candidates; HeadsExpire decides.
	bound := ids.Day(now.AddDate(-store.HeadRetentionYears, 0, 1))
	rows, err := s.pool.Query(ctx, "SELECT id, day FROM trees WHERE day <= $1 ORDER BY day", bound)
	if err != nil {
		return out, fmt.Errorf("pgstore: prune: %w", err)
	}
	type tree struct {
		ID  int64
		Day string
	}
	old, err := pgx.CollectRows(rows, pgx.RowToStructByPos[tree])
	if err != nil {
		return out, fmt.Errorf("pgstore: prune: %w", err)
	}
	for _, t := range old {
		if expire, err := store.HeadsExpire(t.Day); err != nil || expire.After(now) {
			continue
		}
		if err := s.writeTx(ctx, func(tx pgx.Tx) error { return deleteTree(ctx, tx, t.ID) }); err != nil {
			return out, fmt.Errorf("pgstore: prune tree: %w", err)
		}
		out.Trees++
	}
	rows, err = s.pool.Query(ctx, "SELECT id FROM trees WHERE NOT leaves_pruned AND leaves_expire_at <= $1 ORDER BY leaves_expire_at", now)
	if err != nil {
		return out, fmt.Errorf("pgstore: prune: %w", err)
	}
	expired, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return out, fmt.Errorf("pgstore: prune: %w", err)
	}
	if afterPruneScan != nil {
		afterPruneScan()
	}
	for _, id := range expired {
		pruned := false
		err := s.writeTx(ctx, func(tx pgx.Tx) error {
			// A head committed since the scan may have extended the
			// retention (or the tree may be gone): decide again under the
			// row lock that commits take.
			var due bool
			err := tx.QueryRow(ctx, "SELECT NOT leaves_pruned AND leaves_expire_at <= $2 FROM trees WHERE id = $1 FOR UPDATE",
				id, now).Scan(&due)
			if errors.Is(err, pgx.ErrNoRows) || (err == nil && !due) {
				return nil
			}
			if err != nil {
				return err
			}
			for _, sql := range []string{
				"DELETE FROM leaves WHERE tree_id = $1",
				"DELETE FROM nodes WHERE tree_id = $1",
				"UPDATE trees SET leaves_pruned = true WHERE id = $1",
			} {
				if _, err := tx.Exec(ctx, sql, id); err != nil {
					return err
				}
			}
			pruned = true
			return nil
		})
		if err != nil {
			return out, fmt.Errorf("pgstore: prune leaves: %w", err)
		}
		if pruned {
			out.LeafTrees++
		}
	}
	return out, nil
}

// deleteTree deletes a tree: its row (heads, leaves and nodes go with it,
// ON DELETE CASCADE) and then its forks, which have no foreign key
// (schema.sql). The row goes first: its delete waits for a RecordFork
// that holds the row's lock, so that the forks statement, which reads
// what is committed when it starts, sees that fork too; a RecordFork
// that comes later finds no tree.
func deleteTree(ctx context.Context, tx pgx.Tx, rowID int64) error {
	for _, sql := range []string{
		"DELETE FROM trees WHERE id = $1",
		"DELETE FROM forks WHERE tree_id = $1",
	} {
		if _, err := tx.Exec(ctx, sql, rowID); err != nil {
			return err
		}
	}
	return nil
}
