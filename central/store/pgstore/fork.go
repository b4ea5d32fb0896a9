package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/central/store"
)

// RecordFork keeps a fork's evidence once per refused head and tree, at
// most maxPerTree of a tree (store.Store), in one transaction that holds
// the tree's row lock, so that processes recording forks of one tree at
// once count them right, and then the tenant's row of fork_numbers, so
// that numbers are given in commit order: a reader that saw fork n never
// misses a fork numbered below n committed after it.
func (s *Store) RecordFork(ctx context.Context, f store.Fork, maxPerTree int) (bool, error) {
	id := f.Tree()
	digest, raw, err := store.ForkDigest(f.Head)
	if err != nil {
		return false, err
	}
	storedRaw, err := json.Marshal(f.Stored)
	if err != nil {
		return false, fmt.Errorf("pgstore: marshal the stored head: %w", err)
	}
	recorded := false
	err = s.writeTx(ctx, func(tx pgx.Tx) error {
		rowID, _, _, err := lockTree(ctx, tx, id)
		if err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM forks WHERE tree_id = $1 AND digest = $2", rowID, digest[:]).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		if maxPerTree > 0 {
			if err := tx.QueryRow(ctx, "SELECT count(*) FROM (SELECT 1 FROM forks WHERE tree_id = $1 LIMIT $2) f", rowID, maxPerTree).Scan(&n); err != nil {
				return err
			}
			if n >= maxPerTree {
				return fmt.Errorf("%w: %s holds %d", store.ErrForkLimit, id, maxPerTree)
			}
		}
		var number int64
		if err := tx.QueryRow(ctx, `INSERT INTO fork_numbers (tenant_id, next) VALUES ($1, 1)
			ON CONFLICT (tenant_id) DO UPDATE SET next = fork_numbers.next + 1 RETURNING next - 1`, id.TenantID).Scan(&number); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO forks (tenant_id, number, tree_id, appliance_id, day, digest, signed_head, event_count, merkle_root,
			stored_head, stored_event_count, stored_root, stored_root_from_nodes, consistency_proof, received_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
			id.TenantID, number, rowID, id.ApplianceID, id.Day, digest[:], string(raw), int64(f.Head.EventCount), f.Head.MerkleRoot,
			string(storedRaw), int64(f.Stored.EventCount), f.StoredRoot, f.FromNodes, proofArray(f.ConsistencyProof), f.ReceivedAt)
		recorded = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("pgstore: record fork of %s: %w", id, err)
	}
	return recorded, nil
}

// forksSQL reads a tenant's forks ($1) numbered from $2 on, of the
// appliance $3 and the day $4 when not empty, at most $5 (NULL: no limit),
// by number: a range of the primary key (tenant_id, number), read in
// order.
const forksSQL = `SELECT number, signed_head, stored_head, stored_root, stored_root_from_nodes, consistency_proof, received_at FROM forks
WHERE tenant_id = $1 AND number >= $2 AND ($3 = '' OR appliance_id = $3) AND ($4 = '' OR day = $4)
ORDER BY number LIMIT $5`

// Forks returns a tenant's forks q selects, by number (store.Store).
func (s *Store) Forks(ctx context.Context, tenantID string, q store.ForkQuery) ([]store.Fork, error) {
	var lim *int64 // LIMIT NULL: no limit
	if q.Limit > 0 {
		n := int64(q.Limit)
		lim = &n
	}
	from := int64(min(q.From, 1<<62))
	rows, err := s.pool.Query(ctx, forksSQL, tenantID, from, q.ApplianceID, q.Day, lim)
	if err != nil {
		return nil, fmt.Errorf("pgstore: forks of %s: %w", tenantID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Fork, error) {
		var (
			f              store.Fork
			number         int64
			signed, stored string
			at             time.Time
		)
		if err := r.Scan(&number, &signed, &stored, &f.StoredRoot, &f.FromNodes, &f.ConsistencyProof, &at); err != nil {
			return store.Fork{}, err
		}
		var err error
		if f.Head, err = decodeHead(signed); err != nil {
			return store.Fork{}, err
		}
		if f.Stored, err = decodeHead(stored); err != nil {
			return store.Fork{}, err
		}
		if len(f.ConsistencyProof) == 0 {
			f.ConsistencyProof = nil
		}
		f.Number, f.ReceivedAt = uint64(number), at.UTC()
		return f, nil
	})
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("pgstore: forks of %s: %w", tenantID, err)
	}
	if out == nil {
		out = []store.Fork{}
	}
	return out, nil
}

// proofArray is a consistency proof as the bytea[] column takes it: an
// empty array, not NULL, when there is none.
func proofArray(hashes [][]byte) [][]byte {
	if hashes == nil {
		return [][]byte{}
	}
	return hashes
}
