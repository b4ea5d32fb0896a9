package webtest

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// StalledBodies end a request whose body stalls after its first byte: one
// announced by Content-Length, and a chunked one. Append one to a request
// line and headers (each ending in CRLF).
var StalledBodies = []string{"Content-Length: 100\r\n\r\n{", "Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n"}

// WantAnswerThenClose writes head (a request line and headers, ending in
// one of StalledBodies) to host on a connection of its own, then checks
// that the server answers status with Connection: close and closes the
// connection, while the body stalls. The connection's deadline is a guard
// against hanging, not a timing assertion.
func WantAnswerThenClose(tb testing.TB, host, head string, status int) {
	tb.Helper()
	conn, err := net.Dial("tcp", host)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	if _, err := io.WriteString(conn, head); err != nil {
		tb.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		tb.Fatalf("no answer while the body stalls: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != status || !resp.Close { // Close: Connection: close
		tb.Errorf("%d, close %t; want %d and Connection: close", resp.StatusCode, resp.Close, status)
	}
	if n, err := br.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		tb.Errorf("the connection is still open after the answer (read %d bytes, %v)", n, err)
	}
}
