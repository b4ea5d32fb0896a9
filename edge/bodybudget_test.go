package edge_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// bigChat is a chat request of about n bytes.
func bigChat(n int) string {
	head := `{"model":"builtin/echo","max_tokens":4,"messages":[{"role":"user","content":"`
	tail := `"}]}`
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}

// awaitBodies waits until the edge holds want bytes of bodies (it reads
// them on the server's goroutines).
func awaitBodies(t *testing.T, s *stack, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.edge.BodyBytesInFlight() != want {
		if time.Now().After(deadline) {
			t.Fatalf("bodies in flight: %d bytes, want %d", s.edge.BodyBytesInFlight(), want)
		}
		runtime.Gosched()
	}
}

// Bodies beyond MaxBodyBytesInFlight are refused with 503 and Retry-After
// before they are read (Content-Length) or once they pass it (chunked);
// under it they are served.
func TestBodyBudget(t *testing.T) {
	const budget = 1 << 20
	s := newStack(t, stackConfig{audit: newAuditRecorder(), maxBodyBytes: budget, maxBodyBytesInFlight: budget})
	body := bigChat(600 << 10)
	head := "POST " + chatPath + " HTTP/1.1\r\nHost: " + s.host() + "\r\nAuthorization: Bearer " + keyAll + "\r\n"

	// A holds 600 KiB of the budget while its body arrives.
	a := s.sendRaw(t, head+fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body))+body[:10])
	awaitBodies(t, s, int64(len(body)))

	// B does not fit: refused before its body is read.
	r := s.post(t, chatPath, keyAll, body)
	wantError(t, r, http.StatusServiceUnavailable, "service_unavailable", "server_error", "")
	if r.header.Get("Retry-After") != "1" || !strings.Contains(string(r.body), "request bodies at once") {
		t.Fatalf("refusal: Retry-After %q, %s", r.header.Get("Retry-After"), r.body)
	}

	// C, chunked, is refused once it passes what is left.
	c, err := net.Dial("tcp", s.host())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	go func() {
		_, _ = io.WriteString(c, head+"Transfer-Encoding: chunked\r\n\r\n"+fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body))
	}()
	rc := readRaw(t, c, "for a chunked body over the budget")
	wantError(t, rc, http.StatusServiceUnavailable, "service_unavailable", "server_error", "")

	// A completes and is served; then B fits.
	if _, err := io.WriteString(a, body[10:]); err != nil {
		t.Fatal(err)
	}
	if ra := readRaw(t, a, "for the body under the budget"); ra.status != http.StatusOK {
		t.Fatalf("A: %d %s", ra.status, ra.body)
	}
	awaitBodies(t, s, 0)
	if r := s.post(t, chatPath, keyAll, body); r.status != http.StatusOK {
		t.Fatalf("B once A is done: %d %s", r.status, r.body)
	}
	awaitBodies(t, s, 0)
}
