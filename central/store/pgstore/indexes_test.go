package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/central/store/pgstore"
)

// TestIndexesBuiltOnOpen: opening a store whose trees table lacks an
// index, or holds one left invalid by a concurrent build that did not
// finish, builds it (concurrently, so as not to block ingest) and leaves
// it valid; the next open leaves it as it is.
func TestIndexesBuiltOnOpen(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage string
	}{
		{"missing", `DROP INDEX trees_by_appliance`},
		// What an interrupted CREATE INDEX CONCURRENTLY leaves behind.
		{"invalid", `UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'trees_by_appliance'::regclass`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, schema := openSchema(t)
			conn := connect(t, schema)
			ctx := context.Background()
			if _, err := conn.Exec(ctx, tc.damage); err != nil {
				t.Fatal(err)
			}
			if valid, found := indexState(t, conn, "trees_by_appliance"); valid || (tc.name == "missing") == found {
				t.Fatalf("damage left the index valid %v, present %v", valid, found)
			}
			for range 2 {
				s, err := pgstore.Open(ctx, dsn(), pgstore.Options{Schema: schema, MaxConns: 2})
				if err != nil {
					t.Fatal(err)
				}
				_ = s.Close()
				if valid, found := indexState(t, conn, "trees_by_appliance"); !valid || !found {
					t.Fatalf("after open: index valid %v, present %v", valid, found)
				}
			}
		})
	}
}

// indexState reports whether the index of trees named name exists and
// is valid.
func indexState(t *testing.T, conn *pgx.Conn, name string) (valid, found bool) {
	t.Helper()
	err := conn.QueryRow(context.Background(), `SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid = 'trees'::regclass AND c.relname = $1`, name).Scan(&valid)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return valid, true
}
