package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/central/store/pgstore"
)

// planNode is a node of EXPLAIN (FORMAT JSON)'s plan.
type planNode struct {
	NodeType  string     `json:"Node Type"`
	Relation  string     `json:"Relation Name"`
	Index     string     `json:"Index Name"`
	Direction string     `json:"Scan Direction"`
	IndexCond string     `json:"Index Cond"`
	Plans     []planNode `json:"Plans"`
}

func (n planNode) walk(f func(planNode)) {
	f(n)
	for _, c := range n.Plans {
		c.walk(f)
	}
}

// TestLatestHeadsPlan: every page of the heads list (LatestHeadsSQL, the
// first page and one after a page token, each with and without a limit,
// the service's paged and unpaged limits among them), planned for its
// arguments or generically as a statement cached after five runs, reads a
// day's trees as a range of trees_by_appliance, the page token's bound in
// the index condition, in the index's order (no sort), and each tree's
// latest head through heads' primary key: a page costs its size, not the
// day's. Sequential scans are disabled so that the small test table does
// not make one the cheapest plan; if the index cannot serve the statement
// (another column order, collation or ORDER BY), the planner has to sort,
// filter or scan instead, and the test fails.
func TestLatestHeadsPlan(t *testing.T) {
	_, schema := openSchema(t)
	conn := connect(t, schema)
	ctx := context.Background()
	// 10 tenants, 10 days, 100 appliances each: enough rows for the
	// statistics to tell a day's range from the table.
	for _, q := range []string{
		`INSERT INTO trees (tenant_id, day, appliance_id, heads, retention_days, leaves_expire_at)
		SELECT 'tenant' || t, '2026-03-' || lpad(d::text, 2, '0'), 'app_' || md5(t || '/' || d || '/' || a), 1, 30, now()
		FROM generate_series(1, 10) t, generate_series(1, 10) d, generate_series(1, 100) a`,
		`INSERT INTO heads (tree_id, n, head) SELECT id, 0, '{}' FROM trees`,
		`ANALYZE trees`,
		`ANALYZE heads`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		after string
		limit int
	}{
		{"first page", "", 11},
		{"first page unlimited", "", 0},
		{"first chunk unpaged", "", 1000},
		{"next page", "app_7", 11},
		{"next page unlimited", "app_7", 0},
		{"next chunk unpaged", "app_7", 1000},
	} {
		args := pgstore.LatestHeadsArgs("tenant3", "2026-03-05", c.after, c.limit)
		t.Run(c.name+"/custom", func(t *testing.T) {
			checkLatestHeadsPlan(t, explain(t, conn, false, args))
		})
		t.Run(c.name+"/generic", func(t *testing.T) {
			checkLatestHeadsPlan(t, explain(t, conn, true, args))
		})
	}
}

// explain returns the plan of LatestHeadsSQL for args, with sequential
// scans disabled: the plan for these arguments, or the generic plan.
func explain(t *testing.T, conn *pgx.Conn, generic bool, args []any) planNode {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// The two ways a small table is read cheapest whatever its indexes:
	// a sequential scan, and a bitmap scan, whose rows come in the
	// table's order, never an index's.
	for _, set := range []string{"SET LOCAL enable_seqscan = off", "SET LOCAL enable_bitmapscan = off"} {
		if _, err := tx.Exec(ctx, set); err != nil {
			t.Fatal(err)
		}
	}
	var raw string
	if generic {
		// force_generic_plan: the plan a prepared statement is given
		// when the server stops planning it for each run's arguments.
		if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "PREPARE latest_heads AS "+pgstore.LatestHeadsSQL); err != nil {
			t.Fatal(err)
		}
		defer func() { _, _ = conn.Exec(ctx, "DEALLOCATE latest_heads") }()
		lits := make([]string, len(args))
		for i, a := range args {
			lits[i] = literal(a)
		}
		err = tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) EXECUTE latest_heads("+strings.Join(lits, ", ")+")").Scan(&raw)
	} else {
		err = tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+pgstore.LatestHeadsSQL, args...).Scan(&raw)
	}
	if err != nil {
		t.Fatal(err)
	}
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(raw), &plans); err != nil || len(plans) != 1 {
		t.Fatalf("EXPLAIN output %s: %v", raw, err)
	}
	return plans[0].Plan
}

// literal is a as an SQL literal: a string, or a *int64 (nil: NULL).
func literal(a any) string {
	switch v := a.(type) {
	case string:
		return "'" + strings.ReplaceAll(v, "'", "''") + "'"
	case *int64:
		if v == nil {
			return "NULL"
		}
		return fmt.Sprint(*v)
	}
	panic(fmt.Sprintf("literal of %T", a))
}

func checkLatestHeadsPlan(t *testing.T, plan planNode) {
	t.Helper()
	var trees, heads []planNode
	plan.walk(func(n planNode) {
		switch {
		case n.NodeType == "Sort" || n.NodeType == "Incremental Sort":
			t.Errorf("%s node: the index does not give the ORDER BY", n.NodeType)
		case strings.Contains(n.NodeType, "Seq Scan"):
			t.Errorf("%s of %s", n.NodeType, n.Relation)
		case n.Relation == "trees":
			trees = append(trees, n)
		case n.Relation == "heads":
			heads = append(heads, n)
		}
	})
	if len(trees) != 1 || len(heads) != 1 {
		t.Fatalf("%d scans of trees, %d of heads; want 1 each", len(trees), len(heads))
	}
	tr := trees[0]
	if tr.NodeType != "Index Scan" || tr.Index != "trees_by_appliance" || tr.Direction != "Forward" {
		t.Errorf("trees read by %s %s %s; want a forward Index Scan of trees_by_appliance", tr.Direction, tr.NodeType, tr.Index)
	}
	// The day and the page token's bound in the index condition: the scan
	// reads the page's range, not the tenant's trees through a filter.
	for _, col := range []string{"tenant_id =", "day =", `appliance_id)::text > `} {
		if !strings.Contains(tr.IndexCond, col) {
			t.Errorf("index condition %q lacks %q", tr.IndexCond, col)
		}
	}
	if h := heads[0]; h.NodeType != "Index Scan" || h.Index != "heads_pkey" || !strings.Contains(h.IndexCond, "n =") {
		t.Errorf("heads read by %s %s (%s); want an Index Scan of heads_pkey on tree_id and n", h.NodeType, h.Index, h.IndexCond)
	}
	if t.Failed() {
		out, _ := json.MarshalIndent(plan, "", "  ")
		t.Logf("plan: %s", out)
	}
}
