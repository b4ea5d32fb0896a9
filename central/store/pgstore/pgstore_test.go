package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/central/store/pgstore"
	"github.com/tollgate-dev/tollgate/central/store/storetest"
	"github.com/tollgate-dev/tollgate/internal/pgtest"
)

// dsn is the PostgreSQL the tests use, each in a schema of its own.
func dsn() string { return pgtest.DSN() }

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
	schema := pgtest.Schema(t, "central_test")
	s, err := pgstore.Open(context.Background(), dsn, pgstore.Options{Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
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

func TestConformance(t *testing.T) { storetest.Run(t, open) }

// TestReopen: opening an existing schema again keeps what it holds.
func TestReopen(t *testing.T) {
	schema := pgtest.Schema(t, "central_test")
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
	})
	if heads, err := stores[1].LatestHeads(ctx, "acme", "2026-03-01", "", 0); err != nil || len(heads) != 0 {
		t.Fatalf("LatestHeads on a fresh schema: %v, %v", heads, err)
	}
}

func BenchmarkProof(b *testing.B) {
	schema := pgtest.Schema(b, "central_bench")
	s, err := pgstore.Open(context.Background(), dsn(), pgstore.Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	storetest.BenchmarkProofs(b, s, 100_000)
}

// BenchmarkHeadStorage: the bytes a stored head takes in PostgreSQL, the
// heads table with its index and TOAST, and the trees table.
func BenchmarkHeadStorage(b *testing.B) {
	schema := pgtest.Schema(b, "central_bench")
	s, err := pgstore.Open(context.Background(), dsn(), pgstore.Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	storetest.BenchmarkHeadStorage(b, s, func() (int64, error) { return s.RelationBytes(context.Background(), "heads") })
}

// BenchmarkLeafStorage: the bytes a stored leaf takes in PostgreSQL, the
// leaves and nodes tables with their indexes and TOAST.
func BenchmarkLeafStorage(b *testing.B) {
	schema := pgtest.Schema(b, "central_bench")
	s, err := pgstore.Open(context.Background(), dsn(), pgstore.Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	storetest.BenchmarkLeafStorage(b, s, func() (int64, error) {
		ctx := context.Background()
		l, err := s.RelationBytes(ctx, "leaves")
		if err != nil {
			return 0, err
		}
		n, err := s.RelationBytes(ctx, "nodes")
		return l + n, err
	})
}

func BenchmarkConsistency(b *testing.B) {
	schema := pgtest.Schema(b, "central_bench")
	s, err := pgstore.Open(context.Background(), dsn(), pgstore.Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	storetest.BenchmarkConsistency(b, s)
}

// pingAttempts is the pool's size (openSchemaDSN's MaxConns) plus one.
const pingAttempts = 4 + 1

// TestPing: Ping answers while the database does; after the database
// ended every connection of the pool, each Ping that meets an ended
// connection fails and drops it, and one answers again within the pool's
// size plus one (the pool dials anew); it fails once the context has
// ended, and once the pool is closed.
func TestPing(t *testing.T) {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	app := "tollgate_ping_" + hex.EncodeToString(rnd[:])
	s, _ := openSchemaDSN(t, withSetting(dsn(), "application_name", app))
	ctx := context.Background()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	var ended int
	if err := connect(t, "public").QueryRow(ctx,
		"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&ended); err != nil {
		t.Fatal(err)
	}
	if ended == 0 {
		t.Fatal("no connection of the pool was found to end")
	}
	var pingErr error
	for range pingAttempts {
		if pingErr = s.Ping(ctx); pingErr == nil {
			break
		}
	}
	if pingErr != nil {
		t.Fatalf("Ping after the database ended the pool's %d connections: %v", ended, pingErr)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Ping(canceled); err == nil {
		t.Error("Ping with an ended context answered nil")
	}
	_ = s.Close()
	if err := s.Ping(ctx); err == nil {
		t.Error("Ping of a closed store answered nil")
	}
}
