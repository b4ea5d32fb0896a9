package pgstore_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/transparency-dev/merkle/compact"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/store"
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

// TestUpgradeAddsLeafColumn: opening a schema whose leaves table predates
// canonical leaves (testdata/schema-before-forks.sql) adds the leaf
// column; a leaf stored before reads back without its bytes, and one
// committed after with them. A second open finds the column and leaves
// the table alone.
func TestUpgradeAddsLeafColumn(t *testing.T) {
	schema := pgtest.Schema(t, "central_test")
	ctx := context.Background()
	old, err := os.ReadFile("testdata/schema-before-forks.sql")
	if err != nil {
		t.Fatal(err)
	}
	setup := connect(t, schema)
	if _, err := setup.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if _, err := setup.Exec(ctx, string(old)); err != nil {
		t.Fatal(err)
	}
	h := head.Head{TenantID: "acme", ApplianceID: "app_one", Day: "2026-03-01", EventCount: 1, LastSequence: 1,
		MerkleRoot: strings.Repeat("ab", 32), Signature: "sig", SignedAt: "2026-03-01T12:00:00Z", Certificate: "cert"}
	raw, _ := json.Marshal(h)
	for _, sql := range []string{
		`INSERT INTO trees (id, tenant_id, day, appliance_id, heads, retention_days, leaves_expire_at)
			VALUES (1, 'acme', '2026-03-01', 'app_one', 1, 90, now())`,
		`INSERT INTO heads (tree_id, n, head) VALUES (1, 0, '` + string(raw) + `')`,
		`INSERT INTO leaves (tree_id, leaf_index, request_id, sequence, leaf_hash) VALUES (1, 0, 'req_old', 1, '\xab')`,
		`INSERT INTO nodes (tree_id, level, idx, hash) VALUES (1, 0, 0, '\xab')`,
	} {
		if _, err := setup.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		s, err := pgstore.Open(ctx, dsn(), pgstore.Options{Schema: schema, MaxConns: 2})
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.Proof(ctx, store.TreeOf(h), "req_old")
		_ = s.Close()
		if err != nil || p.Leaf.RequestID != "req_old" || p.Leaf.Leaf != nil {
			t.Fatalf("a leaf stored before the upgrade: %+v, %v", p.Leaf, err)
		}
	}
	s, err := pgstore.Open(ctx, dsn(), pgstore.Options{Schema: schema, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	canon := []byte(`{"request_id":"req_new"}`) // a store keeps what it is given
	next := h
	next.EventCount, next.LastSequence = 2, 2
	if err := s.Commit(ctx, store.Commit{Head: next, PrevHeads: 1, LeafRetentionDays: 90,
		Leaves: []store.Leaf{{RequestID: "req_new", Sequence: 2, LeafIndex: 1, LeafHash: make([]byte, 32), Leaf: canon}},
		Nodes:  []store.Node{{ID: compact.NewNodeID(0, 1), Hash: make([]byte, 32)}, {ID: compact.NewNodeID(1, 0), Hash: make([]byte, 32)}},
	}); err != nil {
		t.Fatal(err)
	}
	if p, err := s.Proof(ctx, store.TreeOf(h), "req_new"); err != nil || string(p.Leaf.Leaf) != string(canon) {
		t.Fatalf("a leaf committed after the upgrade: %+v, %v", p.Leaf, err)
	}
}
