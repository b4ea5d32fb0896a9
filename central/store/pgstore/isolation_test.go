package pgstore_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

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
