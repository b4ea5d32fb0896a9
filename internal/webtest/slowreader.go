package webtest

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// AskWithoutReading sends GET path with token as a bearer credential to
// host, on a connection of its own whose receive buffer is 4 KiB, and
// returns the connection without reading the answer: a client that stops
// reading, for tests of write timeouts. The test's cleanup closes it.
func AskWithoutReading(tb testing.TB, host, path, token string) net.Conn {
	tb.Helper()
	conn, err := net.Dial("tcp", host)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	if err := conn.(*net.TCPConn).SetReadBuffer(4 << 10); err != nil {
		tb.Fatal(err)
	}
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer %s\r\n\r\n", path, token); err != nil {
		tb.Fatal(err)
	}
	return conn
}

// SendBufferMax is the most a TCP socket may buffer for sending: the
// maximum of net.ipv4.tcp_wmem (Linux's default is 4 MiB; tuned hosts
// raise it), 4 MiB where it cannot be read. An answer to an
// AskWithoutReading client must be well over it to be held up.
func SendBufferMax(tb testing.TB) int {
	tb.Helper()
	const linuxDefault = 4 << 20
	raw, err := os.ReadFile("/proc/sys/net/ipv4/tcp_wmem")
	if err != nil {
		return linuxDefault
	}
	f := strings.Fields(string(raw))
	if len(f) != 3 {
		tb.Fatalf("tcp_wmem %q: want three numbers", raw)
	}
	n, err := strconv.Atoi(f[2])
	if err != nil || n <= 0 {
		tb.Fatalf("tcp_wmem %q: %v", raw, err)
	}
	return max(n, linuxDefault)
}
