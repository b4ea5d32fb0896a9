package rest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
	"github.com/tollgate-dev/tollgate/internal/webtest"
)

// failing is an AuditQueryService whose calls fail with err.
type failing struct {
	centralv1.UnimplementedAuditQueryServiceServer
	err chan error
}

func (f *failing) ListHeads(context.Context, *centralv1.ListHeadsRequest) (*centralv1.ListHeadsResponse, error) {
	return nil, <-f.err
}

// TestServerErrors: a failure of the query service is answered 5xx in
// the envelope with a message that says what happened, without the
// service's details: a query that ran out of time is 503 and says so,
// not "internal error".
func TestServerErrors(t *testing.T) {
	svc := &failing{err: make(chan error, 1)}
	hs := serveREST(t, svc)

	for _, c := range []struct {
		name      string
		err       error
		status    int
		code, msg string
		typ       string
	}{
		{"deadline exceeded", status.Error(codes.DeadlineExceeded, "context deadline exceeded in the store"),
			http.StatusServiceUnavailable, "service_unavailable", "the query did not complete in time; retry later", "server_error"},
		{"unavailable", status.Error(codes.Unavailable, "connection error: dial tcp 127.0.0.1:8092: connect: connection refused"),
			http.StatusServiceUnavailable, "service_unavailable", "the audit query service is unavailable; retry later", "server_error"},
		{"internal", status.Error(codes.Internal, "disk on fire"),
			http.StatusInternalServerError, "internal_error", "internal error", "server_error"},
		// What a client that hung up would have been told (nginx's "client
		// closed request"), were it still there.
		{"canceled", status.Error(codes.Canceled, "context canceled"),
			499, "canceled", "context canceled", "invalid_request_error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			svc.err <- c.err
			st, _, body := webtest.Get(t, hs.URL+"/v1/tenants/acme/audit/heads?day=2026-11-23", "tga_the_token")
			var env struct {
				Error struct{ Code, Message, Type string }
			}
			if err := json.Unmarshal(body, &env); err != nil || st != c.status || env.Error.Code != c.code ||
				env.Error.Message != c.msg || env.Error.Type != c.typ {
				t.Fatalf("%d %s; want %d %s %q", st, body, c.status, c.code, c.msg)
			}
		})
	}
}

// TestConnectIsNotFoundInTheEnvelope: http.ServeMux answered CONNECT
// (whose target is a host, not a path) with a plain-text 404, outside the
// envelope every other unknown route gets.
func TestConnectIsNotFoundInTheEnvelope(t *testing.T) {
	hs := serveREST(t, &failing{err: make(chan error, 1)})
	conn, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var env struct {
		Error struct{ Code, Message, Type string }
	}
	if err := json.Unmarshal(body, &env); err != nil || resp.StatusCode != http.StatusNotFound || env.Error.Code != "not_found" ||
		resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %q %s; want 404 not_found in the envelope", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}
