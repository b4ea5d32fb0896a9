package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/transparency-dev/merkle/compact"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/store"
)

// headsFromSQL reads a tree's heads numbered from $4 on, at most $5 (NULL:
// no limit), in order: a range of the heads' primary key (tree_id, n).
const headsFromSQL = `SELECT h.head FROM trees t JOIN heads h ON h.tree_id = t.id
WHERE t.tenant_id = $1 AND t.day = $2 AND t.appliance_id = $3 AND h.n >= $4
ORDER BY h.n LIMIT $5`

// HeadsFrom returns a tree's heads numbered from on, at most limit of
// them (store.Store).
func (s *Store) HeadsFrom(ctx context.Context, id store.TreeID, from, limit int) ([]head.Head, error) {
	var lim *int64 // LIMIT NULL: no limit
	if limit > 0 {
		n := int64(limit)
		lim = &n
	}
	rows, err := s.pool.Query(ctx, headsFromSQL, id.TenantID, id.Day, id.ApplianceID, max(from, 0), lim)
	if err != nil {
		return nil, fmt.Errorf("pgstore: heads of %s from %d: %w", id, from, err)
	}
	return collectHeads(rows)
}

// Consistency reads two heads of a tree and the consistency proof between
// them (store.Store) in a read-only REPEATABLE READ transaction, so that
// the heads found by bisection and the nodes are of one snapshot, which a
// commit or a prune in between cannot change.
func (s *Store) Consistency(ctx context.Context, id store.TreeID, from, to uint64) (store.Consistency, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return store.Consistency{}, fmt.Errorf("pgstore: begin read: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var (
		rowID  int64
		t      store.Tree
		latest string
	)
	err = tx.QueryRow(ctx, latestSQL, id.TenantID, id.Day, id.ApplianceID).Scan(&rowID, &t.Heads, &t.LeafRetentionDays, &t.LeavesPruned, &latest)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.Consistency{}, fmt.Errorf("%w: tree %s", store.ErrNotFound, id)
	case err != nil:
		return store.Consistency{}, fmt.Errorf("pgstore: tree %s: %w", id, err)
	}
	if t.Head, err = decodeHead(latest); err != nil {
		return store.Consistency{}, err
	}
	at := func(n int) (head.Head, error) {
		var raw string
		if err := tx.QueryRow(ctx, "SELECT head FROM heads WHERE tree_id = $1 AND n = $2", rowID, n).Scan(&raw); err != nil {
			return head.Head{}, fmt.Errorf("pgstore: head %d of %s: %w", n, id, err)
		}
		return decodeHead(raw)
	}
	nodes := func(ids []compact.NodeID) ([][]byte, error) { return s.nodes(ctx, tx, rowID, id, ids) }
	out, err := store.ReadConsistency(t.Head, t.Heads, t.LeavesPruned, from, to, at, nodes)
	if err != nil {
		return store.Consistency{}, fmt.Errorf("pgstore: consistency of %s: %w", id, err)
	}
	return out, nil
}
