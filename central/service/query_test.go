package service_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/apierr"
	"github.com/tollgate-dev/tollgate/central/auth"
	"github.com/tollgate-dev/tollgate/central/service"
	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/central/store/boltstore"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
)

const (
	day   = "2026-03-01"
	token = "tga_test_service_acme"
)

// listWith returns a ListHeads that calls q as the gRPC server does, with
// the token interceptor ahead of it.
func listWith(t *testing.T, q *service.Query) func(*centralv1.ListHeadsRequest) (*centralv1.ListHeadsResponse, error) {
	t.Helper()
	tokens := auth.NewTokens()
	if err := tokens.SetAuditTokens(context.Background(), "acme", []string{token}); err != nil {
		t.Fatal(err)
	}
	return func(req *centralv1.ListHeadsRequest) (*centralv1.ListHeadsResponse, error) {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+token))
		res, err := tokens.UnaryInterceptor(ctx, req, nil, func(ctx context.Context, req any) (any, error) {
			return q.ListHeads(ctx, req.(*centralv1.ListHeadsRequest))
		})
		if err != nil {
			return nil, err
		}
		return res.(*centralv1.ListHeadsResponse), nil
	}
}

// storeWith holds n heads of acme on day, each of about headLen bytes
// encoded, and returns the store and the appliance ids in order.
func storeWith(t *testing.T, n, certLen int) (store.Store, []string) {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "central.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	var apps []string
	for i := range n {
		app := fmt.Sprintf("app_%03d", i)
		apps = append(apps, app)
		h := head.Head{TenantID: "acme", ApplianceID: app, Day: day, MerkleRoot: head.EmptyRoot(), Signature: "sig",
			SignedAt: day + "T12:00:00Z", Certificate: strings.Repeat("c", certLen)}
		if err := st.Commit(context.Background(), store.Commit{Head: h, LeafRetentionDays: 1}); err != nil {
			t.Fatal(err)
		}
	}
	return st, apps
}

func applianceIDs(res *centralv1.ListHeadsResponse) []string {
	var out []string
	for _, h := range res.GetData() {
		out = append(out, h.GetApplianceId())
	}
	return out
}

// TestListHeadsResponseLimit: with a response limit small enough for a
// few heads, a list without page_size that fits it exactly is served
// whole; one byte less and it is refused with page_size_required
// (InvalidArgument); pages are cut short to fit, and paging still yields
// every head once. No response is larger than the limit.
func TestListHeadsResponseLimit(t *testing.T) {
	const n = 10
	st, apps := storeWith(t, n, 1000)
	all, err := listWith(t, service.NewQuery(st, nil))(&centralv1.ListHeadsRequest{TenantId: "acme", Day: day})
	if err != nil || !reflect.DeepEqual(applianceIDs(all), apps) {
		t.Fatalf("whole list: %v, %v", applianceIDs(all), err)
	}
	whole := proto.Size(all)

	if res, err := listWith(t, service.NewQuery(st, nil, service.WithMaxResponse(whole)))(&centralv1.ListHeadsRequest{TenantId: "acme", Day: day}); err != nil || len(res.GetData()) != n {
		t.Fatalf("a list of exactly the limit: %d heads, %v", len(res.GetData()), err)
	}
	_, err = listWith(t, service.NewQuery(st, nil, service.WithMaxResponse(whole-1)))(&centralv1.ListHeadsRequest{TenantId: "acme", Day: day})
	st1 := status.Convert(err)
	if info := apierr.Info(st1); st1.Code() != codes.InvalidArgument || info == nil || info.GetReason() != apierr.ReasonPageSizeRequired ||
		!strings.Contains(st1.Message(), "page_size") {
		t.Fatalf("a list a byte over the limit: %v", err)
	}

	limit := whole / 3 // about three heads a page
	list := listWith(t, service.NewQuery(st, nil, service.WithMaxResponse(limit)))
	var got []string
	req := &centralv1.ListHeadsRequest{TenantId: "acme", Day: day, PageSize: proto.Int32(service.MaxPageSize)}
	for pages := 0; ; pages++ {
		res, err := list(req)
		if err != nil {
			t.Fatal(err)
		}
		if size := proto.Size(res); size > limit || len(res.GetData()) == 0 {
			t.Fatalf("page %d: %d bytes, %d heads (limit %d)", pages, size, len(res.GetData()), limit)
		}
		got = append(got, applianceIDs(res)...)
		if res.NextPageToken == nil {
			break
		}
		if pages > n {
			t.Fatal("paging does not end")
		}
		req.PageToken = res.NextPageToken
	}
	if !reflect.DeepEqual(got, apps) {
		t.Fatalf("pages cut to the limit: %v; want %v", got, apps)
	}
}

// TestListHeadsPageToken: a page token that does not decode to an
// appliance id is InvalidArgument naming page_token; the last page of a
// list that ends exactly at page_size has no token.
func TestListHeadsPageToken(t *testing.T) {
	st, apps := storeWith(t, 4, 10)
	list := listWith(t, service.NewQuery(st, nil))
	for _, tok := range []string{"Zm9v", "YXBwXw", "YXBwX2E=", "AAAA"} { // foo, app_, padded, zero bytes
		_, err := list(&centralv1.ListHeadsRequest{TenantId: "acme", Day: day, PageSize: proto.Int32(2), PageToken: proto.String(tok)})
		if s := status.Convert(err); s.Code() != codes.InvalidArgument || !strings.Contains(s.Message(), "page_token") {
			t.Errorf("token %q: %v", tok, err)
		}
	}
	res, err := list(&centralv1.ListHeadsRequest{TenantId: "acme", Day: day, PageSize: proto.Int32(2)})
	if err != nil || !reflect.DeepEqual(applianceIDs(res), apps[:2]) || res.NextPageToken == nil {
		t.Fatalf("first page: %v, %v", res, err)
	}
	res, err = list(&centralv1.ListHeadsRequest{TenantId: "acme", Day: day, PageSize: proto.Int32(2), PageToken: res.NextPageToken})
	if err != nil || !reflect.DeepEqual(applianceIDs(res), apps[2:]) || res.NextPageToken != nil {
		t.Fatalf("last page: %v, %v", applianceIDs(res), err)
	}
}
