package pgstore

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/central/store"
)

// SetAfterPruneScan runs f between Prune's scan for expired leaves and its
// deletions, until the test ends.
func SetAfterPruneScan(t *testing.T, f func()) {
	afterPruneScan = f
	t.Cleanup(func() { afterPruneScan = nil })
}

// SetAfterCommitStart runs f in Commit between its first statement (which
// takes a snapshot under REPEATABLE READ or SERIALIZABLE) and its lock of
// the tree's row, until the test ends.
func SetAfterCommitStart(t *testing.T, f func()) {
	afterCommitStart = f
	t.Cleanup(func() { afterCommitStart = nil })
}

// SetAfterProofHead runs f between Proof's read of the leaf and head and
// its read of the audit path, until the test ends.
func SetAfterProofHead(t *testing.T, f func()) {
	afterProofHead = f
	t.Cleanup(func() { afterProofHead = nil })
}

// SetAfterLeavesRow runs f between Nodes' or Leaves' check of the tree and
// their read of its rows, until the test ends.
func SetAfterLeavesRow(t *testing.T, f func()) {
	afterLeavesRow = f
	t.Cleanup(func() { afterLeavesRow = nil })
}

// LatestHeadsSQL is the statement of LatestHeads, and LatestHeadsArgs its
// arguments.
const LatestHeadsSQL = latestHeadsSQL

// LatestHeadsArgs returns the arguments of LatestHeadsSQL.
func LatestHeadsArgs(tenantID, day, after string, limit int) []any {
	return latestHeadsArgs(tenantID, day, after, limit)
}

// IndexLockKey is the first key of the advisory lock of index builds.
const IndexLockKey = indexLockKey

// StoredRows counts the leaves and nodes the tables hold for a tree,
// whatever its reads answer (storetest.RowCounter).
func (s *Store) StoredRows(ctx context.Context, id store.TreeID) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM leaves l WHERE l.tree_id = t.id) + (SELECT count(*) FROM nodes n WHERE n.tree_id = t.id)
		FROM trees t WHERE t.tenant_id = $1 AND t.day = $2 AND t.appliance_id = $3`, id.TenantID, id.Day, id.ApplianceID).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// RelationBytes is what a table of the store's schema takes on disk, its
// indexes and TOAST included, after a VACUUM has brought the statistics
// and free space up to date.
func (s *Store) RelationBytes(ctx context.Context, table string) (int64, error) {
	if _, err := s.pool.Exec(ctx, "VACUUM "+pgx.Identifier{table}.Sanitize()); err != nil {
		return 0, err
	}
	var n int64
	err := s.pool.QueryRow(ctx, "SELECT pg_total_relation_size($1::regclass)", table).Scan(&n)
	return n, err
}
