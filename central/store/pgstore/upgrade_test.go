package pgstore_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/central/store/pgstore"
	"github.com/tollgate-dev/tollgate/internal/pgtest"
)

// TestUpgradeBesideCommit: opening a schema of the layout before fork
// evidence (testdata/schema-before-forks.sql) while a commit holds a row
// of trees, uncommitted, adds the fork tables without waiting for it.
// The forks table used to reference trees, a foreign key whose creation
// locks trees (SHARE ROW EXCLUSIVE) in the migration's transaction: it
// waited for the commit in flight, and every later commit queued behind
// it.
func TestUpgradeBesideCommit(t *testing.T) {
	schema := pgtest.Schema(t, "central_test")
	ctx := context.Background()
	old, err := os.ReadFile("testdata/schema-before-forks.sql")
	if err != nil {
		t.Fatal(err)
	}
	setup, holder, watcher := connect(t, schema), connect(t, schema), connect(t, schema)
	if _, err := setup.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if _, err := setup.Exec(ctx, string(old)); err != nil {
		t.Fatal(err)
	}
	if _, err := setup.Exec(ctx, `INSERT INTO trees (tenant_id, day, appliance_id, retention_days, leaves_expire_at)
		VALUES ('acme', '2026-03-01', 'app_one', 30, now())`); err != nil {
		t.Fatal(err)
	}
	// A commit in flight: it holds the tree's row until it ends.
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var pid int32
	if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "UPDATE trees SET heads = heads + 1"); err != nil {
		t.Fatal(err)
	}

	// A hang guard, not a timing assertion: the open is failed as soon as
	// it waits for the commit.
	octx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	type result struct {
		s   *pgstore.Store
		err error
	}
	opened := make(chan result, 1)
	go func() {
		s, err := pgstore.Open(octx, dsn(), pgstore.Options{Schema: schema, MaxConns: 2})
		opened <- result{s, err}
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var r result
wait:
	for {
		select {
		case r = <-opened:
			break wait
		case <-tick.C:
		}
		var blocked bool
		if err := watcher.QueryRow(octx, "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid)))",
			pid).Scan(&blocked); err != nil {
			t.Fatalf("watch the open: %v", err)
		}
		if blocked {
			_ = tx.Rollback(ctx)
			if r = <-opened; r.err == nil {
				_ = r.s.Close()
			}
			t.Fatal("opening the existing schema waited for a commit in flight")
		}
	}
	if r.err != nil {
		t.Fatalf("open beside a commit in flight: %v", r.err)
	}
	t.Cleanup(func() { _ = r.s.Close() })
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("the commit in flight, after the open: %v", err)
	}
	var fks int
	if err := setup.QueryRow(ctx, "SELECT count(*) FROM pg_constraint WHERE conrelid = 'forks'::regclass AND contype = 'f'").Scan(&fks); err != nil {
		t.Fatal(err)
	}
	if fks != 0 {
		t.Fatalf("forks has %d foreign keys, want none", fks)
	}
}
