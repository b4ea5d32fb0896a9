package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tollgate-dev/tollgate/central/store"
)

// afterCommitStart, when set, runs in Commit between its first statement
// and its lock of the tree's row (tests).
var afterCommitStart func()

// writeTx runs fn in a READ COMMITTED transaction, whatever the session's
// default. Commit and Prune take the tree's row lock (SELECT ... FOR
// UPDATE) and decide on the row as it is once locked: under READ
// COMMITTED that is the latest committed version, so a commit that lost a
// race sees the winner's head count (ErrConflict) and a prune the
// retention a commit just set. Under REPEATABLE READ or SERIALIZABLE (a
// site's default_transaction_isolation) the same race fails with a
// serialization error instead, which ingest would report as an internal
// error rather than a conflict to retry.
func (s *Store) writeTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, fn)
}

// Commit stores a verified head with its leaves and nodes in one
// transaction, holding the tree's row lock; ErrPruned if the tree's
// leaves were pruned.
func (s *Store) Commit(ctx context.Context, c store.Commit) error {
	id := store.TreeOf(c.Head)
	raw, err := json.Marshal(c.Head)
	if err != nil {
		return fmt.Errorf("pgstore: marshal head: %w", err)
	}
	expire, err := store.LeavesExpire(id.Day, c.LeafRetentionDays)
	if err != nil {
		return err
	}
	err = s.writeTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO trees (tenant_id, day, appliance_id, retention_days, leaves_expire_at)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant_id, day, appliance_id) DO NOTHING`,
			id.TenantID, id.Day, id.ApplianceID, c.LeafRetentionDays, expire); err != nil {
			return err
		}
		if afterCommitStart != nil {
			afterCommitStart()
		}
		rowID, heads, pruned, err := lockTree(ctx, tx, id)
		if err != nil {
			return err
		}
		if pruned {
			// Pruned since the caller read it: the leaves would go into a
			// tree Prune does not visit again (it selects NOT
			// leaves_pruned).
			return fmt.Errorf("%w: %s", store.ErrPruned, id)
		}
		if heads != c.PrevHeads {
			return fmt.Errorf("%w: %s has %d heads, not %d", store.ErrConflict, id, heads, c.PrevHeads)
		}
		if err := copyLeaves(ctx, tx, rowID, c); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO heads (tree_id, n, head) VALUES ($1, $2, $3)", rowID, heads, string(raw)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE trees SET heads = heads + 1, retention_days = $2, leaves_expire_at = $3 WHERE id = $1`,
			rowID, c.LeafRetentionDays, expire)
		return err
	})
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "leaves_request_unique":
		return fmt.Errorf("%w: in %s", store.ErrDuplicateRequest, id)
	case errors.As(err, &pgErr) && pgErr.Code == "23505":
		// Another process created the same head or leaf first.
		return fmt.Errorf("%w: %s: %v", store.ErrConflict, id, pgErr.Message)
	case err != nil:
		return fmt.Errorf("pgstore: commit head of %s: %w", id, err)
	}
	return nil
}

// copyLeaves bulk-loads the new leaves and nodes.
func copyLeaves(ctx context.Context, tx pgx.Tx, rowID int64, c store.Commit) error {
	if len(c.Leaves) > 0 {
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"leaves"}, []string{"tree_id", "leaf_index", "request_id", "sequence", "leaf_hash", "leaf"},
			pgx.CopyFromSlice(len(c.Leaves), func(i int) ([]any, error) {
				l := c.Leaves[i]
				var canon []byte // NULL without one
				if len(l.Leaf) > 0 {
					canon = l.Leaf
				}
				return []any{rowID, int64(l.LeafIndex), l.RequestID, int64(l.Sequence), l.LeafHash, canon}, nil
			}))
		if err != nil {
			return err
		}
	}
	if len(c.Nodes) > 0 {
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"nodes"}, []string{"tree_id", "level", "idx", "hash"},
			pgx.CopyFromSlice(len(c.Nodes), func(i int) ([]any, error) {
				n := c.Nodes[i]
				return []any{rowID, int16(n.ID.Level), int64(n.ID.Index), n.Hash}, nil
			}))
		if err != nil {
			return err
		}
	}
	return nil
}
