package h1server

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestExpectContinue: 100 Continue is sent when the handler first reads
// the body, and never if it does not (the connection then closes).
func TestExpectContinue(t *testing.T) {
	t.Run("sent on the first read", func(t *testing.T) {
		_, addr, _ := start(t, echo)
		c := dial(t, addr)
		c.send("POST /p HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
		line, err := c.br.ReadString('\n')
		if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
			t.Fatalf("first line %q: %v", line, err)
		}
		if blank, _ := c.br.ReadString('\n'); blank != "\r\n" {
			t.Fatalf("after 100 Continue: %q", blank)
		}
		c.send("body")
		if r := c.read("POST"); r.StatusCode != http.StatusOK || r.body != "POST /p body" || r.Close {
			t.Fatalf("%d %q close=%v", r.StatusCode, r.body, r.Close)
		}
	})
	t.Run("not sent when the body is not read", func(t *testing.T) {
		_, addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusUnauthorized)
		}))
		c := dial(t, addr)
		c.send("POST /p HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
		line, err := c.br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 401 ") {
			t.Fatalf("first line %q: %v", line, err)
		}
		rest, _ := io.ReadAll(c.br)
		if !strings.Contains(string(rest), "Connection: close") {
			t.Fatalf("no Connection: close in %q", rest)
		}
	})
}
