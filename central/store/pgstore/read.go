package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/transparency-dev/merkle/compact"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/store"
)

// latestSQL reads a tree and its latest head.
const latestSQL = `SELECT t.id, t.heads, t.retention_days, t.leaves_pruned, h.head
FROM trees t JOIN heads h ON h.tree_id = t.id AND h.n = t.heads - 1
WHERE t.tenant_id = $1 AND t.day = $2 AND t.appliance_id = $3`

// Tree returns a tree's state.
func (s *Store) Tree(ctx context.Context, id store.TreeID) (store.Tree, error) {
	var (
		rowID int64
		t     store.Tree
		raw   string
	)
	err := s.pool.QueryRow(ctx, latestSQL, id.TenantID, id.Day, id.ApplianceID).Scan(&rowID, &t.Heads, &t.LeafRetentionDays, &t.LeavesPruned, &raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Tree{}, fmt.Errorf("%w: tree %s", store.ErrNotFound, id)
	}
	if err != nil {
		return store.Tree{}, fmt.Errorf("pgstore: tree %s: %w", id, err)
	}
	if t.Head, err = decodeHead(raw); err != nil {
		return store.Tree{}, err
	}
	return t, nil
}

func decodeHead(raw string) (head.Head, error) {
	var h head.Head
	if err := json.Unmarshal([]byte(raw), &h); err != nil {
		return head.Head{}, fmt.Errorf("pgstore: stored head: %w", err)
	}
	return h, nil
}

// Heads returns every head of a tree, oldest first.
func (s *Store) Heads(ctx context.Context, id store.TreeID) ([]head.Head, error) {
	rows, err := s.pool.Query(ctx, `SELECT h.head FROM heads h JOIN trees t ON t.id = h.tree_id
		WHERE t.tenant_id = $1 AND t.day = $2 AND t.appliance_id = $3 ORDER BY h.n`, id.TenantID, id.Day, id.ApplianceID)
	if err != nil {
		return nil, fmt.Errorf("pgstore: heads of %s: %w", id, err)
	}
	return collectHeads(rows)
}

// HeadAt returns a tree's n-th head.
func (s *Store) HeadAt(ctx context.Context, id store.TreeID, n int) (head.Head, error) {
	var raw string
	err := s.pool.QueryRow(ctx, `SELECT h.head FROM heads h JOIN trees t ON t.id = h.tree_id
		WHERE t.tenant_id = $1 AND t.day = $2 AND t.appliance_id = $3 AND h.n = $4`, id.TenantID, id.Day, id.ApplianceID, n).Scan(&raw)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return head.Head{}, fmt.Errorf("%w: head %d of %s", store.ErrNotFound, n, id)
	case err != nil:
		return head.Head{}, fmt.Errorf("pgstore: head %d of %s: %w", n, id, err)
	}
	return decodeHead(raw)
}

func collectHeads(rows pgx.Rows) ([]head.Head, error) {
	raws, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("pgstore: heads: %w", err)
	}
	out := make([]head.Head, 0, len(raws))
	for _, raw := range raws {
		h, err := decodeHead(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

// querier is what the reads need of a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// afterLeavesRow, when set, runs between Nodes' or Leaves' check of the
// tree and their read of its rows (tests).
var afterLeavesRow func()

// readKept runs read on the row of a tree whose leaves are kept, in a
// read-only REPEATABLE READ transaction: the tree's check and the read of
// its rows see one snapshot, so a prune committed between them cannot make
// rows go missing, as it cannot in the embedded store, which reads in one
// bbolt transaction.
func (s *Store) readKept(ctx context.Context, id store.TreeID, read func(q querier, rowID int64) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("pgstore: begin read: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	rowID, err := s.leavesRow(ctx, tx, id)
	if err != nil {
		return err
	}
	if afterLeavesRow != nil {
		afterLeavesRow()
	}
	return read(tx, rowID)
}

// leavesRow returns the row id of a tree whose leaves are kept.
func (s *Store) leavesRow(ctx context.Context, q querier, id store.TreeID) (int64, error) {
	var (
		rowID  int64
		pruned bool
	)
	err := q.QueryRow(ctx, "SELECT id, leaves_pruned FROM trees WHERE tenant_id = $1 AND day = $2 AND appliance_id = $3",
		id.TenantID, id.Day, id.ApplianceID).Scan(&rowID, &pruned)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, fmt.Errorf("%w: tree %s", store.ErrNotFound, id)
	case err != nil:
		return 0, fmt.Errorf("pgstore: tree %s: %w", id, err)
	case pruned:
		return 0, fmt.Errorf("%w: tree %s", store.ErrPruned, id)
	}
	return rowID, nil
}

// Nodes returns stored node hashes.
func (s *Store) Nodes(ctx context.Context, id store.TreeID, ids []compact.NodeID) ([][]byte, error) {
	var out [][]byte
	err := s.readKept(ctx, id, func(q querier, rowID int64) (err error) {
		out, err = s.nodes(ctx, q, rowID, id, ids)
		return err
	})
	return out, err
}

func (s *Store) nodes(ctx context.Context, q querier, rowID int64, id store.TreeID, ids []compact.NodeID) ([][]byte, error) {
	levels, idxs := make([]int16, len(ids)), make([]int64, len(ids))
	for i, n := range ids {
		levels[i], idxs[i] = int16(n.Level), int64(n.Index)
	}
	rows, err := q.Query(ctx, `SELECT n.level, n.idx, n.hash FROM nodes n
		JOIN unnest($2::smallint[], $3::bigint[]) AS want(level, idx) ON n.level = want.level AND n.idx = want.idx
		WHERE n.tree_id = $1`, rowID, levels, idxs)
	if err != nil {
		return nil, fmt.Errorf("pgstore: nodes of %s: %w", id, err)
	}
	found := make(map[compact.NodeID][]byte, len(ids))
	var (
		level int16
		idx   int64
		hash  []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&level, &idx, &hash}, func() error {
		found[compact.NewNodeID(uint(level), uint64(idx))] = append([]byte(nil), hash...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: nodes of %s: %w", id, err)
	}
	out := make([][]byte, len(ids))
	for i, n := range ids {
		if out[i] = found[n]; out[i] == nil {
			return nil, fmt.Errorf("%w: node (%d, %d) of %s", store.ErrNotFound, n.Level, n.Index, id)
		}
	}
	return out, nil
}

// Leaves returns stored leaves [from, to).
func (s *Store) Leaves(ctx context.Context, id store.TreeID, from, to uint64) ([]store.Leaf, error) {
	var out []store.Leaf
	err := s.readKept(ctx, id, func(q querier, rowID int64) (err error) {
		out, err = s.leaves(ctx, q, rowID, id, from, to)
		return err
	})
	return out, err
}

func (s *Store) leaves(ctx context.Context, q querier, rowID int64, id store.TreeID, from, to uint64) ([]store.Leaf, error) {
	if to > 1<<62 {
		to = 1 << 62
	}
	rows, err := q.Query(ctx, `SELECT leaf_index, request_id, sequence, leaf_hash, leaf FROM leaves
		WHERE tree_id = $1 AND leaf_index >= $2 AND leaf_index < $3 ORDER BY leaf_index`, rowID, int64(from), int64(to))
	if err != nil {
		return nil, fmt.Errorf("pgstore: leaves of %s: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Leaf, error) {
		var (
			l        store.Leaf
			idx, seq int64
		)
		err := r.Scan(&idx, &l.RequestID, &seq, &l.LeafHash, &l.Leaf)
		l.LeafIndex, l.Sequence = uint64(idx), uint64(seq)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: leaves of %s: %w", id, err)
	}
	return out, nil
}

// afterProofHead, when set, runs between Proof's read of the leaf and head
// and its read of the audit path (tests).
var afterProofHead func()

// Proof reads a request's leaf, the latest head and the audit path.
func (s *Store) Proof(ctx context.Context, id store.TreeID, requestID string) (store.Proof, error) {
	var (
		rowID    int64
		pruned   bool
		raw      string
		idx, seq *int64
		hash     []byte
		canon    []byte
	)
	err := s.pool.QueryRow(ctx, `SELECT t.id, t.leaves_pruned, h.head, l.leaf_index, l.sequence, l.leaf_hash, l.leaf
		FROM trees t JOIN heads h ON h.tree_id = t.id AND h.n = t.heads - 1
		LEFT JOIN leaves l ON l.tree_id = t.id AND l.request_id = $4
		WHERE t.tenant_id = $1 AND t.day = $2 AND t.appliance_id = $3`,
		id.TenantID, id.Day, id.ApplianceID, requestID).Scan(&rowID, &pruned, &raw, &idx, &seq, &hash, &canon)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.Proof{}, fmt.Errorf("%w: tree %s", store.ErrNotFound, id)
	case err != nil:
		return store.Proof{}, fmt.Errorf("pgstore: proof in %s: %w", id, err)
	case pruned:
		return store.Proof{}, fmt.Errorf("%w: tree %s", store.ErrPruned, id)
	case idx == nil:
		return store.Proof{}, fmt.Errorf("%w: request %s in %s", store.ErrNotFound, requestID, id)
	}
	h, err := decodeHead(raw)
	if err != nil {
		return store.Proof{}, err
	}
	l := store.Leaf{RequestID: requestID, Sequence: uint64(*seq), LeafIndex: uint64(*idx), LeafHash: hash, Leaf: canon}
	if afterProofHead != nil {
		afterProofHead()
	}
	hashes, err := store.InclusionHashes(l.LeafIndex, h.EventCount, func(ids []compact.NodeID) ([][]byte, error) {
		return s.nodes(ctx, s.pool, rowID, id, ids)
	})
	if errors.Is(err, store.ErrNotFound) {
		// The leaf and head were read in a statement of their own: a
		// prune since then deleted the nodes. Say so, as a store that
		// reads in one transaction would, not that the request is unknown.
		if _, perr := s.leavesRow(ctx, s.pool, id); errors.Is(perr, store.ErrPruned) {
			return store.Proof{}, perr
		}
	}
	if err != nil {
		return store.Proof{}, err
	}
	return store.Proof{Head: h, Leaf: l, Hashes: hashes}, nil
}

// latestHeadsSQL reads the latest heads of a tenant's day ($1, $2) whose
// appliance id is after $3 (” for the first page), at most $4 of them
// (NULL: no limit), in bytewise order (COLLATE "C") whatever the
// database's collation. Every page is this one statement: the comparison
// and the ORDER BY are those of the index trees_by_appliance (tenant_id,
// day, appliance_id COLLATE "C"), so that a page is an index range read in
// order, no sort, whatever the page token and limit; a test checks the
// plans.
const latestHeadsSQL = `SELECT h.head FROM trees t JOIN heads h ON h.tree_id = t.id AND h.n = t.heads - 1
WHERE t.tenant_id = $1 AND t.day = $2 AND t.appliance_id COLLATE "C" > $3
ORDER BY t.appliance_id COLLATE "C" LIMIT $4`

// latestHeadsArgs are the arguments of latestHeadsSQL.
func latestHeadsArgs(tenantID, day, after string, limit int) []any {
	var lim *int64 // LIMIT NULL: no limit
	if limit > 0 {
		n := int64(limit)
		lim = &n
	}
	return []any{tenantID, day, after, lim}
}

// LatestHeads returns the latest head of each appliance of a tenant's day
// after the appliance id after, at most limit of them (store.Store), in
// bytewise order (latestHeadsSQL).
func (s *Store) LatestHeads(ctx context.Context, tenantID, day, after string, limit int) ([]head.Head, error) {
	rows, err := s.pool.Query(ctx, latestHeadsSQL, latestHeadsArgs(tenantID, day, after, limit)...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: heads of %s on %s: %w", tenantID, day, err)
	}
	return collectHeads(rows)
}
