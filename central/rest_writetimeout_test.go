package central_test

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/central"
	"github.com/tollgate-dev/tollgate/central/centraltest"
	"github.com/tollgate-dev/tollgate/internal/webtest"
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
	// 16 heads of 1 MiB or more (a store does not check ingest's
	// certificate bound): more than the sockets between the two ends
	// buffer.
	apps := make([]string, max(16, 2*webtest.SendBufferMax(t)/(1<<20)+2))
	for i := range apps {
		apps[i] = fmt.Sprintf("app_%02d", i)
	}
	commitHeads(t, p.Store, day, apps, 1<<20)

	conn := webtest.AskWithoutReading(t, p.Addrs.REST, "/v1/tenants/acme/audit/heads?day="+day, acmeToken)
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
