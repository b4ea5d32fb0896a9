package service_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/audit/head"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/audit/service"
	auditv1 "github.com/tollgate-dev/tollgate/gen/tollgate/audit/v1"
	"github.com/tollgate-dev/tollgate/internal/grpctest"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// setup opens a log with events of two tenants (the last one after the
// signed heads) and serves it over a real gRPC server, interceptors
// included.
func setup(t *testing.T) (auditv1.AuditServiceClient, *x509.Certificate) {
	t.Helper()
	l, ca := openLog(t)
	for i, tenant := range []string{"acme", "globex", "acme", "acme"} {
		appendEvent(t, l, "req_"+tenant+string(rune('a'+i)), tenant)
		if i == 2 {
			if _, err := l.SignHeads(now); err != nil {
				t.Fatal(err)
			}
		}
	}
	return serve(t, l), ca
}

// openLog opens an empty log signing as app_svc, and returns it with the
// fleet CA certificate.
func openLog(t *testing.T) (*auditlog.Log, *x509.Certificate) {
	t.Helper()
	ca, err := fleet.NewCA("test CA", now.AddDate(0, -1, 0))
	if err != nil {
		t.Fatal(err)
	}
	ca.Now = func() time.Time { return now.AddDate(0, -1, 0) }
	certPEM, keyPEM, err := fleet.IssueAppliance(ca, "app_svc")
	if err != nil {
		t.Fatal(err)
	}
	app, err := fleet.ParseAppliance(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	l, err := auditlog.Open(t.TempDir(), auditlog.Options{Signer: app, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, ca.Cert
}

func appendEvent(t *testing.T, l *auditlog.Log, requestID, tenant string) {
	t.Helper()
	ev := auditlog.Event{
		RequestID: requestID, TenantID: tenant, KeyID: "key_k" + tenant,
		Time: now, Endpoint: "/v1/chat/completions", Model: "builtin/echo", Status: 200,
		RequestBody: []byte(`{"q":1}`), ResponseBody: []byte(`{"a":2}`),
	}
	if _, err := l.Append(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
}

// serve serves l's AuditService over a real gRPC server.
func serve(t *testing.T, l *auditlog.Log) auditv1.AuditServiceClient {
	t.Helper()
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) { service.Register(s, l, nil) })
	return auditv1.NewAuditServiceClient(conn)
}

func TestGetEvent(t *testing.T) {
	c, _ := setup(t)
	ctx := context.Background()
	resp, err := c.GetEvent(ctx, &auditv1.GetEventRequest{TenantId: "acme", RequestId: "req_acmec"})
	if err != nil {
		t.Fatal(err)
	}
	ev := resp.GetEvent()
	if ev.GetSequence() != 3 || ev.GetLeafIndex() != 1 || ev.GetDay() != "2026-03-01" || ev.GetKeyId() != "key_kacme" ||
		!bytes.Equal(ev.GetRequestBody(), []byte(`{"q":1}`)) || !bytes.Equal(ev.GetResponseBody(), []byte(`{"a":2}`)) ||
		!ev.GetTime().AsTime().Equal(now) || ev.GetApplianceId() != "app_svc" || len(ev.GetLeaf()) == 0 {
		t.Fatalf("event %v", ev)
	}
	_, err = c.GetEvent(ctx, &auditv1.GetEventRequest{TenantId: "globex", RequestId: "req_acmec"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("another tenant's event: %v", err)
	}
}

func TestHeadsAndProofs(t *testing.T) {
	c, ca := setup(t)
	ctx := context.Background()
	got, err := c.GetHead(ctx, &auditv1.GetHeadRequest{TenantId: "acme", Day: "2026-03-01"})
	if err != nil {
		t.Fatal(err)
	}
	h := service.HeadFromProto(got.GetHead())
	if err := head.Verify(h, ca); err != nil {
		t.Fatal(err)
	}
	if h.EventCount != 2 || h.LastSequence != 3 {
		t.Fatalf("head %+v", h)
	}
	list, err := c.ListHeads(ctx, &auditv1.ListHeadsRequest{TenantId: "acme", Day: "2026-03-01"})
	if err != nil || len(list.GetHeads()) != 1 {
		t.Fatalf("ListHeads = %v, %v", list, err)
	}
	p, err := c.GetInclusionProof(ctx, &auditv1.GetInclusionProofRequest{TenantId: "acme", Day: "2026-03-01", RequestId: "req_acmec"})
	if err != nil {
		t.Fatal(err)
	}
	ph := service.HeadFromProto(p.GetHead())
	if err := head.Verify(ph, ca); err != nil {
		t.Fatal(err)
	}
	if err := head.VerifyInclusion(ph, p.GetLeaf(), p.GetLeafIndex(), p.GetHashes()); err != nil {
		t.Fatal(err)
	}
	cp, err := c.GetConsistencyProof(ctx, &auditv1.GetConsistencyProofRequest{TenantId: "acme", Day: "2026-03-01", FromSize: 1, ToSize: 2})
	if err != nil || len(cp.GetHashes()) != 1 {
		t.Fatalf("GetConsistencyProof = %v, %v", cp, err)
	}
}

// TestListHeadsPages reads a tree's heads a page at a time: every head
// once, in order, each page within page_size, next_from 0 on the last.
func TestListHeadsPages(t *testing.T) {
	l, _ := openLog(t)
	const heads = 5
	for i := range heads {
		appendEvent(t, l, fmt.Sprintf("req_page%d", i), "acme")
		if _, err := l.SignHeads(now); err != nil {
			t.Fatal(err)
		}
	}
	c := serve(t, l)
	ctx := context.Background()
	for _, size := range []uint32{0, 1, 2, 4, 5, 1000} {
		t.Run(fmt.Sprintf("page_size=%d", size), func(t *testing.T) {
			var counts []uint64
			var from uint64
			pages := 0
			for {
				resp, err := c.ListHeads(ctx, &auditv1.ListHeadsRequest{TenantId: "acme", Day: "2026-03-01", From: from, PageSize: size})
				if err != nil {
					t.Fatal(err)
				}
				pages++
				if size != 0 && len(resp.GetHeads()) > int(size) {
					t.Fatalf("page of %d heads, page_size %d", len(resp.GetHeads()), size)
				}
				for _, h := range resp.GetHeads() {
					counts = append(counts, h.GetEventCount())
				}
				if resp.GetNextFrom() == 0 {
					break
				}
				if resp.GetNextFrom() != from+uint64(len(resp.GetHeads())) || pages > heads {
					t.Fatalf("next_from %d after %d heads from %d", resp.GetNextFrom(), len(resp.GetHeads()), from)
				}
				from = resp.GetNextFrom()
			}
			if want := []uint64{1, 2, 3, 4, 5}; !slices.Equal(counts, want) {
				t.Fatalf("event counts of the heads read %v, want %v", counts, want)
			}
		})
	}
	resp, err := c.ListHeads(ctx, &auditv1.ListHeadsRequest{TenantId: "acme", Day: "2026-03-01", From: heads})
	if err != nil || len(resp.GetHeads()) != 0 || resp.GetNextFrom() != 0 {
		t.Fatalf("from past the last head: %v, %v", resp, err)
	}
	_, err = c.ListHeads(ctx, &auditv1.ListHeadsRequest{TenantId: "acme", Day: "2026-03-01", PageSize: service.MaxHeadsPage + 1})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("page_size over the maximum: %v", err)
	}
}

func TestErrors(t *testing.T) {
	c, _ := setup(t)
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"bad tenant", func() error {
			_, err := c.GetHead(ctx, &auditv1.GetHeadRequest{TenantId: "Acme!", Day: "2026-03-01"})
			return err
		}, codes.InvalidArgument},
		{"impossible day", func() error {
			_, err := c.GetHead(ctx, &auditv1.GetHeadRequest{TenantId: "acme", Day: "2026-02-30"})
			return err
		}, codes.InvalidArgument},
		{"no head yet", func() error {
			_, err := c.GetHead(ctx, &auditv1.GetHeadRequest{TenantId: "acme", Day: "2026-02-28"})
			return err
		}, codes.NotFound},
		{"not covered yet", func() error {
			_, err := c.GetInclusionProof(ctx, &auditv1.GetInclusionProofRequest{TenantId: "acme", Day: "2026-03-01", RequestId: "req_acmed"})
			return err
		}, codes.FailedPrecondition},
		{"unknown request", func() error {
			_, err := c.GetInclusionProof(ctx, &auditv1.GetInclusionProofRequest{TenantId: "acme", Day: "2026-03-01", RequestId: "req_zzz"})
			return err
		}, codes.NotFound},
		{"sizes out of order", func() error {
			_, err := c.GetConsistencyProof(ctx, &auditv1.GetConsistencyProofRequest{TenantId: "acme", Day: "2026-03-01", FromSize: 3, ToSize: 2})
			return err
		}, codes.InvalidArgument},
		{"tree too small", func() error {
			_, err := c.GetConsistencyProof(ctx, &auditv1.GetConsistencyProofRequest{TenantId: "acme", Day: "2026-03-01", FromSize: 1, ToSize: 9})
			return err
		}, codes.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); status.Code(err) != tt.want {
				t.Fatalf("got %v, want %s", err, tt.want)
			}
		})
	}
}

// TestAnotherTenantsEventIsNone: for GetEvent and GetInclusionProof, another
// tenant's request id (covered by a head or not) gets the same status code
// and message as a request id the log does not hold.
func TestAnotherTenantsEventIsNone(t *testing.T) {
	c, _ := setup(t)
	ctx := context.Background()
	answer := func(err error, requestID string) string {
		t.Helper()
		st, ok := status.FromError(err)
		if !ok || st.Code() != codes.NotFound {
			t.Fatalf("%s: %v, want NotFound", requestID, err)
		}
		return strings.ReplaceAll(st.Message(), requestID, "<id>")
	}
	getEvent := func(requestID string) string {
		_, err := c.GetEvent(ctx, &auditv1.GetEventRequest{TenantId: "globex", RequestId: requestID})
		return answer(err, requestID)
	}
	getProof := func(requestID string, size uint64) string {
		_, err := c.GetInclusionProof(ctx, &auditv1.GetInclusionProofRequest{TenantId: "globex", Day: "2026-03-01", RequestId: requestID, TreeSize: size})
		return answer(err, requestID)
	}
	for _, size := range []uint64{0, 1} {
		none := getProof("req_nosuch", size)
		for _, id := range []string{"req_acmec", "req_acmed"} { // covered by a head, not yet
			if got := getProof(id, size); got != none {
				t.Errorf("GetInclusionProof of acme's %s at size %d: %q, of an unknown id: %q", id, size, got, none)
			}
		}
	}
	none := getEvent("req_nosuch")
	for _, id := range []string{"req_acmec", "req_acmed"} {
		if got := getEvent(id); got != none {
			t.Errorf("GetEvent of acme's %s: %q, of an unknown id: %q", id, got, none)
		}
	}
}
