package edge_test

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// dialSmallReceive opens a connection to the stack with a small receive
// buffer, so that a client that stops reading stalls the server's writes
// after a few KiB.
func dialSmallReceive(t *testing.T, s *stack) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10)
		}); err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", s.host())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// A client that stops reading its response, streamed or plain, does not
// hold its request for ever: a write it leaves untaken for the stall bound
// fails, the request ends as one whose client went away, its audit event
// is recorded (a stream's with the bytes written up to then, without
// [DONE]) and its slot is freed. The bound is on the client, never on the
// engine: a stream whose pieces come further apart than the bound is
// relayed whole to a client that reads.
func TestWriteStallBound(t *testing.T) {
	const stall = 100 * time.Millisecond // short, so that a stalled client is given up on quickly
	// Replies of far more than the socket buffers hold: a stream of many
	// events, and a plain reply of one long word (quick to produce).
	manyWords, longWord := strings.Repeat("w ", 200_000), strings.Repeat("w", 512<<10)
	for _, tc := range []struct {
		name   string
		stream bool
		text   string
		reads  bool // the client reads its response
	}{
		{"stream, client stops reading", true, manyWords, false},
		{"plain, client stops reading", false, longWord, false},
		{"stream slower than the bound, client reads", true, "/delay 300 one two three", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			audit := newAuditRecorder()
			closed := make(chan string, 16) // client addresses of the connections the server is done with
			s := newStack(t, stackConfig{audit: audit, writeStall: stall, sendBuffer: 4 << 10,
				connState: func(c net.Conn, st http.ConnState) {
					if st == http.StateClosed {
						closed <- c.RemoteAddr().String()
					}
				}})
			body := fmt.Sprintf(`{"model":"builtin/echo","stream":%t,"messages":[{"role":"user","content":"%s"}]}`, tc.stream, tc.text)
			conn := dialSmallReceive(t, s)
			if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s",
				chatPath, s.host(), keyAll, len(body), body); err != nil {
				t.Fatal(err)
			}
			if tc.reads {
				r := readRaw(t, conn, "to a stream slower than the stall bound")
				if frames := sseFrames(t, r.body); len(frames) != 6 || frames[5] != "data: [DONE]" {
					t.Errorf("frames %q", frames)
				}
				if ev := audit.next(t); ev.Status != http.StatusOK || !bytes.HasSuffix(ev.ResponseBody, []byte("data: [DONE]\n\n")) {
					t.Errorf("recorded status %d, response %q", ev.Status, ev.ResponseBody)
				}
				return
			}
			ev := audit.next(t)
			// Its handler has returned once the server closes the
			// connection; the deadline only guards against a hang.
			for addr := conn.LocalAddr().String(); ; {
				select {
				case a := <-closed:
					if a != addr {
						continue
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the server never gave up on a client that stopped reading")
				}
				break
			}
			if n := s.edge.InFlight(); n != 0 {
				t.Errorf("%d requests in flight after the stalled one ended", n)
			}
			if ev.Status != http.StatusOK || ev.Endpoint != chatPath {
				t.Errorf("recorded %s with status %d", ev.Endpoint, ev.Status)
			}
			if tc.stream && (!bytes.HasPrefix(ev.ResponseBody, []byte("data: {")) || bytes.Contains(ev.ResponseBody, []byte("[DONE]"))) {
				t.Errorf("recorded a stream of %d bytes, want its first events and no [DONE]", len(ev.ResponseBody))
			}
			if w := s.logs.warnings(); len(w) > 0 {
				t.Errorf("a client that stopped reading was logged: %q", w)
			}
		})
	}
}
