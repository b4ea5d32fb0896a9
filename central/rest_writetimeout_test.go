package central_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/central"
	"github.com/tollgate-dev/tollgate/central/centraltest"
)

// TestRESTWriteTimeoutEndsSlowReader: a client that asks for a large heads
// list and reads none of it has its connection closed at the write
// timeout, instead of holding the answer (up to 64 MiB) and the
// connection for as long as it likes.
func TestRESTWriteTimeoutEndsSlowReader(t *testing.T) {
	closed := make(chan struct{}, 8)
	p := centraltest.StartPlaneWith(t, func(c *central.Config) {
		c.RESTWriteTimeout = 300 * time.Millisecond
		c.OnRESTConnClosed = func() { closed <- struct{}{} }
	})
	if err := p.Tokens.SetAuditTokens(context.Background(), "acme", []string{acmeToken}); err != nil {
		t.Fatal(err)
	}
	const day = "2026-03-01"
	// 16 heads of 1 MiB (a store does not check ingest's certificate
	// bound): more than the sockets between the two ends buffer.
	apps := make([]string, 16)
	for i := range apps {
		apps[i] = fmt.Sprintf("app_%02d", i)
	}
	commitHeads(t, p.Store, day, apps, 1<<20)

	conn, err := net.Dial("tcp", p.Addrs.REST)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.(*net.TCPConn).SetReadBuffer(4 << 10); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(conn, "GET /v1/tenants/acme/audit/heads?day=%s HTTP/1.1\r\nHost: central\r\nAuthorization: Bearer %s\r\n\r\n", day, acmeToken); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-time.After(time.Minute): // a hang guard, not a timing
		t.Fatal("the plane still holds the connection of a client that reads nothing, past its write timeout")
	}
	// What the client reads now is what the sockets held: the answer cut short.
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute)) // a hang guard, not a timing
	n, _ := io.Copy(io.Discard, conn)
	if n >= int64(len(apps))<<20 {
		t.Fatalf("the client read %d bytes, the whole answer", n)
	}
}
