package service_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/auth"
	"github.com/tollgate-dev/tollgate/central/service"
	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/central/store/boltstore"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
)

// listForksWith returns a ListForks that calls q as the gRPC server
// does, with the token interceptor ahead of it.
func listForksWith(t *testing.T, q *service.Query) func(*centralv1.ListForksRequest) (*centralv1.ListForksResponse, error) {
	t.Helper()
	tokens := auth.NewTokens()
	if err := tokens.SetAuditTokens(context.Background(), "acme", []string{token}); err != nil {
		t.Fatal(err)
	}
	return func(req *centralv1.ListForksRequest) (*centralv1.ListForksResponse, error) {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+token))
		res, err := tokens.UnaryInterceptor(ctx, req, nil, func(ctx context.Context, req any) (any, error) {
			return q.ListForks(ctx, req.(*centralv1.ListForksRequest))
		})
		if err != nil {
			return nil, err
		}
		return res.(*centralv1.ListForksResponse), nil
	}
}

// countingForks is a store that counts the forks its Forks returns.
type countingForks struct {
	store.Store
	read int
}

func (c *countingForks) Forks(ctx context.Context, tenantID string, q store.ForkQuery) ([]store.Fork, error) {
	out, err := c.Store.Forks(ctx, tenantID, q)
	c.read += len(out)
	return out, err
}

// storeWithForks holds n forks of acme's tree of app_one on day, each
// with heads of certLen-byte certificates, numbered 0 to n-1.
func storeWithForks(t *testing.T, n, certLen int) store.Store {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "central.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	stored := head.Head{TenantID: "acme", ApplianceID: "app_one", Day: day, EventCount: 1, LastSequence: 1,
		MerkleRoot: strings.Repeat("ab", 32), Signature: "sig", SignedAt: day + "T12:00:00Z", Certificate: strings.Repeat("c", certLen)}
	ctx := context.Background()
	if err := st.Commit(ctx, store.Commit{Head: stored, LeafRetentionDays: 1}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		h := stored
		h.MerkleRoot, h.Signature = strings.Repeat("cd", 32), fmt.Sprintf("fork-%d", i)
		f := store.Fork{Head: h, Stored: stored, StoredRoot: stored.MerkleRoot, ReceivedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
		if ok, err := st.RecordFork(ctx, f, 0); err != nil || !ok {
			t.Fatalf("record fork %d: %v, %v", i, ok, err)
		}
	}
	return st
}

func forkNumbers(res *centralv1.ListForksResponse) []uint32 {
	var out []uint32
	for _, f := range res.GetData() {
		out = append(out, f.GetNumber())
	}
	return out
}

// TestListForksResponseLimit: with a response limit small enough for a
// few forks, a page is cut short to fit it, with next_from, after
// reading from the store what it holds and at most a chunk more, not the
// whole page asked for; paging with next_from yields every fork once, a
// page with page_size as well as one without, and no response is larger
// than the limit. ListForks used to read a whole page (1001 forks
// without page_size) before it looked at their size.
func TestListForksResponseLimit(t *testing.T) {
	const n = 250
	st := storeWithForks(t, n, 1000)
	var want []uint32
	for i := range n {
		want = append(want, uint32(i))
	}
	one, err := listForksWith(t, service.NewQuery(st, nil))(&centralv1.ListForksRequest{TenantId: "acme", PageSize: proto.Int32(1)})
	if err != nil || len(one.GetData()) != 1 {
		t.Fatalf("a page of one fork: %v, %v", forkNumbers(one), err)
	}
	limit := 3 * proto.Size(one) // about three forks a page
	for _, c := range []struct {
		name     string
		pageSize *int32
	}{{"no page_size", nil}, {"the largest page_size", proto.Int32(service.MaxForksPageSize)}, {"page_size 2", proto.Int32(2)}} {
		t.Run(c.name, func(t *testing.T) {
			counted := &countingForks{Store: st}
			list := listForksWith(t, service.NewQuery(counted, nil, service.WithMaxResponse(limit)))
			var got []uint32
			req := &centralv1.ListForksRequest{TenantId: "acme", PageSize: c.pageSize}
			for pages := 0; ; pages++ {
				counted.read = 0
				res, err := list(req)
				if err != nil {
					t.Fatal(err)
				}
				if size := proto.Size(res); size > limit || len(res.GetData()) == 0 {
					t.Fatalf("page %d: %d bytes, %d forks (limit %d)", pages, size, len(res.GetData()), limit)
				}
				if most := len(res.GetData()) + service.ForksChunk; counted.read > most {
					t.Fatalf("page %d of %d forks read %d forks from the store, want at most %d", pages, len(res.GetData()), counted.read, most)
				}
				got = append(got, forkNumbers(res)...)
				if res.NextFrom == nil {
					break
				}
				if pages > n {
					t.Fatal("paging does not end")
				}
				req.From = res.GetNextFrom()
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("pages cut to the limit: %v; want 0 to %d", got, n-1)
			}
		})
	}
}
