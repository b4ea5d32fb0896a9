// Package pgstore is the PostgreSQL store of the central plane, for sites
// that already run PostgreSQL or need more than one central process. The
// schema (schema.sql) is created on open, in the configured PostgreSQL
// schema: trees (one row per tenant, appliance and day), heads (every
// head, in commit order), leaves and nodes (for proofs, until the tree's
// leaf retention), forks and fork_numbers (fork evidence, numbered per
// tenant). Commits lock their tree's row (SELECT ... FOR UPDATE).
package pgstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate-dev/tollgate/central/store"
)

//go:embed schema.sql
var schemaSQL string

// Options configure a store.
type Options struct {
	// Schema is the PostgreSQL schema of the tables (created if needed);
	// empty means the connection's default (public).
	Schema string
	// MaxConns bounds the pool (0: pgxpool's default).
	MaxConns int32
}

// Store is a store.Store in PostgreSQL.
type Store struct {
	pool *pgxpool.Pool
}

var _ store.Store = (*Store)(nil)

// Open connects to the database named by dsn (a postgres:// URL or a
// key=value string) and creates the schema if needed.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.Schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = opts.Schema
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	if err := migrate(ctx, pool, opts.Schema); err != nil {
		pool.Close()
		return nil, err
	}
	return &Store{pool: pool}, nil
}

// addLeafColumn adds leaves.leaf to a table made before leaves carried
// their canonical bytes. Only when it is missing: ALTER TABLE takes the
// table's ACCESS EXCLUSIVE lock even when there is nothing to do, which
// would wait for the commits in flight and hold every later one behind
// it on each open. Adding a nullable column without a default rewrites
// nothing, so the one upgrade holds the lock for an instant once the
// commits in flight are done.
func addLeafColumn(ctx context.Context, tx pgx.Tx) error {
	var missing bool
	if err := tx.QueryRow(ctx, `SELECT NOT EXISTS (SELECT 1 FROM pg_attribute
		WHERE attrelid = 'leaves'::regclass AND attname = 'leaf' AND NOT attisdropped)`).Scan(&missing); err != nil || !missing {
		return err
	}
	_, err := tx.Exec(ctx, "ALTER TABLE leaves ADD COLUMN leaf bytea")
	return err
}

// migrate creates the schema and its tables, serialised across processes
// by an advisory lock. A new trees table gets its indexes in the same
// transaction; an existing one, those it lacks from buildIndexes.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	var fresh bool
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(7405013)"); err != nil {
			return err
		}
		if schema != "" {
			if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
				return err
			}
		}
		if err := tx.QueryRow(ctx, "SELECT to_regclass('trees') IS NULL").Scan(&fresh); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, schemaSQL); err != nil {
			return err
		}
		if !fresh {
			return addLeafColumn(ctx, tx)
		}
		// Empty, and seen by no one else until this commits: a plain
		// build is instant and blocks nothing.
		for _, ix := range indexes {
			if _, err := tx.Exec(ctx, ix.create(false)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgstore: create schema: %w", err)
	}
	if fresh {
		return nil
	}
	return buildIndexes(ctx, pool.Config().ConnConfig)
}

// Ping runs SELECT 1 on a connection of the pool within ctx: it fails
// when no connection can be had (the database is down or unreachable, the
// role may not log in, the pool is closed) or the query does not answer
// in time.
func (s *Store) Ping(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, "SELECT 1"); err != nil {
		return fmt.Errorf("pgstore: ping: %w", err)
	}
	return nil
}

// Close closes the pool.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// lockTree reads a tree's id, head count and whether its leaves were
// pruned, locking its row until tx ends.
func lockTree(ctx context.Context, tx pgx.Tx, id store.TreeID) (rowID int64, heads int, pruned bool, err error) {
	err = tx.QueryRow(ctx, "SELECT id, heads, leaves_pruned FROM trees WHERE tenant_id = $1 AND day = $2 AND appliance_id = $3 FOR UPDATE",
		id.TenantID, id.Day, id.ApplianceID).Scan(&rowID, &heads, &pruned)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, false, fmt.Errorf("%w: tree %s", store.ErrNotFound, id)
	}
	return rowID, heads, pruned, err
}
