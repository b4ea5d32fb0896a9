package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/central/store/pgstore"
	"github.com/tollgate-dev/tollgate/internal/pgtest"
)

// withSetting adds a run-time parameter to a connection string, in its
// form (a URL's query, or key=value).
func withSetting(dsn, key, value string) string {
	switch {
	case !strings.Contains(dsn, "://"):
		return dsn + " " + key + "='" + value + "'"
	case strings.Contains(dsn, "?"):
		return dsn + "&" + key + "=" + url.PathEscape(value)
	default:
		return dsn + "?" + key + "=" + url.PathEscape(value)
	}
}

// TestCommitRaceUnderStricterDefault: on a database whose sessions default
// to SERIALIZABLE or REPEATABLE READ, a commit that loses the race for its
// tree to another one (committed after it began) still fails with
// ErrConflict, which ingest answers as a conflict to retry: Commit runs
// READ COMMITTED, as its row lock assumes, and sees the winner's head
// count. Under the session's default it failed with a serialization
// error, an internal error to ingest.
func TestCommitRaceUnderStricterDefault(t *testing.T) {
	for _, level := range []string{"serializable", "repeatable read"} {
		t.Run(level, func(t *testing.T) {
			pgtest.Require(t)
			s, _ := openSchemaDSN(t, withSetting(dsn(), "default_transaction_isolation", level))
			ctx := context.Background()
			if err := s.Commit(ctx, commitOf(1, 0, 30)); err != nil {
				t.Fatal(err)
			}
			raced := false
			pgstore.SetAfterCommitStart(t, func() {
				if raced {
					return
				}
				raced = true
				// Another process commits the tree's next head first.
				if err := s.Commit(ctx, commitOf(2, 1, 30)); err != nil {
					t.Errorf("the winning commit: %v", err)
				}
			})
			loser := commitOf(2, 1, 30)
			loser.Leaves[0].RequestID = "req_other"
			if err := s.Commit(ctx, loser); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("the commit that lost the race: %v, want ErrConflict", err)
			}
			id := store.TreeID{TenantID: "acme", ApplianceID: "app_one", Day: "2026-03-01"}
			if tr, err := s.Tree(ctx, id); err != nil || tr.Heads != 2 {
				t.Fatalf("tree after the race: %+v, %v; want the winner's 2 heads", tr, err)
			}
		})
	}
}

// TestPruneRaceUnderStricterDefault: on a database whose sessions default
// to SERIALIZABLE or REPEATABLE READ, a prune that meets a commit
// extending the tree's leaf retention (it holds the tree's row lock when
// the prune asks for it, and commits while the prune waits) keeps the
// leaves and succeeds: Prune runs READ COMMITTED, as its row lock
// assumes, and decides on the retention the commit set. Under the
// session's default the prune failed with a serialization error, and the
// retention pass with it.
func TestPruneRaceUnderStricterDefault(t *testing.T) {
	for _, level := range []string{"serializable", "repeatable read"} {
		t.Run(level, func(t *testing.T) {
			pgtest.Require(t)
			s, schema := openSchemaDSN(t, withSetting(dsn(), "default_transaction_isolation", level))
			ctx := context.Background()
			if err := s.Commit(ctx, commitOf(1, 0, 30)); err != nil {
				t.Fatal(err)
			}
			expire, _ := store.LeavesExpire("2026-03-01", 30)
			longer, _ := store.LeavesExpire("2026-03-01", 60)
			writer, watcher := connect(t, schema), connect(t, schema)
			committed := make(chan error, 1)
			raced := false
			pgstore.SetAfterPruneScan(t, func() {
				raced = true
				// Another process commits the tree's next head, which
				// keeps the leaves longer (what Commit writes to the
				// tree's row): it holds the row lock until the prune waits.
				tx, err := writer.Begin(ctx)
				if err != nil {
					committed <- err
					return
				}
				var pid int32
				if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
					committed <- err
					return
				}
				if _, err := tx.Exec(ctx, "UPDATE trees SET retention_days = 60, leaves_expire_at = $1", longer); err != nil {
					committed <- err
					return
				}
				go func() {
					committed <- func() error {
						if err := awaitBlocked(watcher, pid); err != nil {
							_ = tx.Rollback(ctx)
							return err
						}
						return tx.Commit(ctx)
					}()
				}()
			})
			p, err := s.Prune(ctx, expire.Add(time.Second))
			if !raced {
				t.Fatalf("Prune = %+v, %v before its scan was done", p, err)
			}
			if err := <-committed; err != nil {
				t.Fatalf("the commit beside the prune: %v", err)
			}
			if err != nil || p != (store.Pruned{}) {
				t.Fatalf("Prune = %+v, %v; want nothing pruned and no error", p, err)
			}
			id := store.TreeID{TenantID: "acme", ApplianceID: "app_one", Day: "2026-03-01"}
			if tr, err := s.Tree(ctx, id); err != nil || tr.LeavesPruned || tr.LeafRetentionDays != 60 {
				t.Fatalf("tree after the race: %+v, %v; want its leaves kept 60 days", tr, err)
			}
			if leaves, err := s.Leaves(ctx, id, 0, 10); err != nil || len(leaves) != 1 {
				t.Fatalf("leaves after the race: %d, %v", len(leaves), err)
			}
		})
	}
}

// awaitBlocked waits, through conn, until a session waits for a lock the
// session pid holds (for at most a minute, a hang guard).
func awaitBlocked(conn *pgx.Conn, pid int32) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		var blocked bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid)))",
			pid).Scan(&blocked); err != nil {
			return fmt.Errorf("no session waited for the lock: %w", err)
		}
		if blocked {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return errors.New("no session waited for the lock within a minute")
		}
	}
}
