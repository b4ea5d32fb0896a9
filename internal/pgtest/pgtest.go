// Package pgtest gives tests the test PostgreSQL: TOLLGATE_TEST_POSTGRES,
// or the local server's test database. Each test works in a schema of its
// own, dropped when it ends. A test skips when PostgreSQL is unreachable,
// but fails under CI=true, where the CI machine's server is part of the
// environment.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DSN is the test PostgreSQL's connection string.
func DSN() string {
	if v := os.Getenv("TOLLGATE_TEST_POSTGRES"); v != "" {
		return v
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

var (
	reachOnce sync.Once
	reachErr  error
)

// Require skips tb when PostgreSQL cannot be reached (asked once per
// process), or fails it under CI=true.
func Require(tb testing.TB) {
	tb.Helper()
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, DSN())
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
		tb.Fatalf("PostgreSQL at %s is unreachable under CI=true: %v", DSN(), reachErr)
	}
	tb.Skipf("PostgreSQL unreachable (%v); set TOLLGATE_TEST_POSTGRES", reachErr)
}

// Schema requires PostgreSQL and returns a fresh schema name starting
// with prefix, which is dropped (with everything in it) when tb ends,
// after the cleanups registered later (closing a store in it) have run.
func Schema(tb testing.TB, prefix string) string {
	tb.Helper()
	Require(tb)
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	schema := prefix + "_" + hex.EncodeToString(rnd[:])
	tb.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, DSN())
		if err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}
