package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// index is a secondary index of the trees table.
type index struct {
	name string
	def  string // what follows ON trees
}

// indexes are the secondary indexes of trees. A new definition needs a new
// name: an index that exists under its name is kept as it is.
var indexes = []index{
	{"trees_by_day", "(day)"},
	// The heads list (latestHeadsSQL) reads a day's trees page by page in
	// appliance id order, bytewise whatever the database's collation.
	{"trees_by_appliance", `(tenant_id, day, appliance_id COLLATE "C")`},
	{"trees_leaves_expiry", "(leaves_expire_at) WHERE NOT leaves_pruned"},
}

func (ix index) create(concurrently bool) string {
	c := ""
	if concurrently {
		c = "CONCURRENTLY "
	}
	return "CREATE INDEX " + c + "IF NOT EXISTS " + ix.name + " ON trees " + ix.def
}

// indexLockKey is the high half of the session advisory lock held, per
// trees table (low half: its oid), while its indexes are checked and
// built; migrate's lock (7405013) is another.
const indexLockKey = 7405014

// indexValidSQL tells whether an index of trees exists and is valid (no
// row: it does not exist), and its name as DROP INDEX takes it.
const indexValidSQL = `SELECT i.indisvalid, i.indexrelid::regclass::text
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = 'trees'::regclass AND c.relname = $1`

// buildIndexes builds, with CREATE INDEX CONCURRENTLY, the indexes of an
// existing trees table that are missing, and rebuilds those left invalid
// by a concurrent build or drop that did not finish (a process or the
// server stopped, a statement timeout): ingest goes on meanwhile, which a
// plain CREATE INDEX would block for as long as it reads the table. A
// concurrent build runs outside any transaction, so it cannot take
// migrate's transaction-scoped lock: it holds a session lock of its own,
// per table, on a connection of its own (closing it releases the lock).
// A process that finds the lock held does not wait: another is building
// (an invalid index is then that build, still running, not a failed one),
// and the store answers the same without the index, only slower. Nor could
// it wait safely: a concurrent build waits for the transactions of the
// database that hold an older snapshot, a statement waiting for the lock
// among them.
func buildIndexes(ctx context.Context, cfg *pgx.ConnConfig) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("pgstore: build indexes: %w", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var locked bool
	// One bigint key: the table's oid can pass the int4 of the two-key
	// form.
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock(($1::bigint << 32) | ('trees'::regclass)::oid::bigint)", indexLockKey).Scan(&locked); err != nil {
		return fmt.Errorf("pgstore: build indexes: %w", err)
	}
	if !locked {
		return nil
	}
	for _, ix := range indexes {
		if err := buildIndex(ctx, conn, ix); err != nil {
			return fmt.Errorf("pgstore: build index %s: %w", ix.name, err)
		}
	}
	return nil
}

func buildIndex(ctx context.Context, conn *pgx.Conn, ix index) error {
	var (
		valid bool
		name  string
	)
	err := conn.QueryRow(ctx, indexValidSQL, ix.name).Scan(&valid, &name)
	switch {
	case err == nil && valid:
		return nil
	case err == nil:
		// Invalid: what is left of a build that failed. Not maintained
		// for nothing, nor kept for IF NOT EXISTS to skip.
		if _, err := conn.Exec(ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+name); err != nil {
			return err
		}
	case !errors.Is(err, pgx.ErrNoRows):
		return err
	}
	// Exec without arguments sends one simple-protocol statement, outside
	// any transaction block, as CONCURRENTLY requires.
	_, err = conn.Exec(ctx, ix.create(true))
	return err
}
