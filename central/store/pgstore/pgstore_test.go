package pgstore_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/central/store/pgstore"
	"github.com/tollgate-dev/tollgate/central/store/storetest"
)

// dsn is the PostgreSQL the tests use (each in a schema of its own);
// TOLLGATE_TEST_POSTGRES overrides it.
func dsn() string {
	if v := os.Getenv("TOLLGATE_TEST_POSTGRES"); v != "" {
		return v
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

var (
	reachOnce sync.Once
	reachErr  error
)

// requirePostgres skips the test when PostgreSQL cannot be reached, but
// fails it under CI=true, where PostgreSQL is part of the environment.
func requirePostgres(t testing.TB) {
	t.Helper()
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn())
		if err == nil {
			err = conn.Ping(ctx)
			_ = conn.Close(ctx)
		}
		reachErr = err
	})
	if reachErr == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("PostgreSQL at %s is unreachable under CI=true: %v", dsn(), reachErr)
	}
	t.Skipf("PostgreSQL unreachable (%v); set TOLLGATE_TEST_POSTGRES", reachErr)
}

// open opens a store in a fresh schema, dropped when the test ends.
func open(t *testing.T) store.Store {
	s, _ := openSchema(t)
	return s
}

// openSchema opens a store in a fresh schema, dropped when the test ends,
// and returns the schema's name.
func openSchema(t *testing.T) (*pgstore.Store, string) {
	t.Helper()
	return openSchemaDSN(t, dsn())
}

// openSchemaDSN is openSchema through the connection string dsn (the test
// database's, with other settings).
func openSchemaDSN(t *testing.T, dsn string) (*pgstore.Store, string) {
	t.Helper()
	requirePostgres(t)
	schema := "central_test_" + fmt.Sprintf("%x", randBytes(6))
	ctx := context.Background()
	s, err := pgstore.Open(ctx, dsn, pgstore.Options{Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return s, schema
}

// connect connects to the test database with schema first in the search
// path, until the test ends.
func connect(t *testing.T, schema string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(dsn())
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = schema
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx) })
	return conn
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func TestConformance(t *testing.T) { storetest.Run(t, open) }

// TestReopen: opening an existing schema again keeps what it holds.
func TestReopen(t *testing.T) {
	requirePostgres(t)
	schema := "central_test_" + fmt.Sprintf("%x", randBytes(6))
	ctx := context.Background()
	var stores []*pgstore.Store
	for range 2 {
		s, err := pgstore.Open(ctx, dsn(), pgstore.Options{Schema: schema, MaxConns: 2})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	t.Cleanup(func() {
		for _, s := range stores {
			_ = s.Close()
		}
		conn, err := pgx.Connect(ctx, dsn())
		if err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			_ = conn.Close(ctx)
		}
	})
	if heads, err := stores[1].LatestHeads(ctx, "acme", "2026-03-01", "", 0); err != nil || len(heads) != 0 {
		t.Fatalf("LatestHeads on a fresh schema: %v, %v", heads, err)
	}
}

func BenchmarkProof(b *testing.B) {
	requirePostgres(b)
	schema := "central_bench_" + fmt.Sprintf("%x", randBytes(6))
	ctx := context.Background()
	s, err := pgstore.Open(ctx, dsn(), pgstore.Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = s.Close()
		if conn, err := pgx.Connect(ctx, dsn()); err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			_ = conn.Close(ctx)
		}
	}()
	storetest.BenchmarkProofs(b, s, 100_000)
}
