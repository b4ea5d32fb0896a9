package h1server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/openai"
)

// echo answers with the request's method, path and body.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, body)
})

// TestWire is the server's behaviour on the wire, request bytes in and
// responses out, as net/http's server behaves.
func TestWire(t *testing.T) {
	big := strings.Repeat("x", 5000)
	tests := []struct {
		name    string
		handler http.Handler
		send    string
		check   func(t *testing.T, c *client)
	}{
		{"keep-alive", echo, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n", func(t *testing.T, c *client) {
			r := c.read("GET")
			if r.StatusCode != http.StatusOK || r.body != "GET /a " || r.Close {
				t.Fatalf("first: %d %q close=%v", r.StatusCode, r.body, r.Close)
			}
			c.send("GET /b HTTP/1.1\r\nHost: x\r\n\r\n")
			if r := c.read("GET"); r.body != "GET /b " {
				t.Fatalf("second on the same connection: %q", r.body)
			}
		}},
		{"pipelined", echo, "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nonePOST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\ntwo", func(t *testing.T, c *client) {
			if r := c.read("POST"); r.body != "POST /a one" {
				t.Fatalf("first: %q", r.body)
			}
			if r := c.read("POST"); r.body != "POST /b two" {
				t.Fatalf("second: %q", r.body)
			}
		}},
		{"chunked request body", echo, "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", func(t *testing.T, c *client) {
			if r := c.read("POST"); r.body != "POST /c abcde" {
				t.Fatalf("body: %q", r.body)
			}
		}},
		{"small reply has a Content-Length", echo, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", func(t *testing.T, c *client) {
			r := c.read("GET")
			if r.ContentLength != int64(len("GET / ")) || len(r.TransferEncoding) != 0 {
				t.Fatalf("Content-Length %d, Transfer-Encoding %v", r.ContentLength, r.TransferEncoding)
			}
		}},
		{"large reply is chunked", write(big), "GET / HTTP/1.1\r\nHost: x\r\n\r\n", func(t *testing.T, c *client) {
			r := c.read("GET")
			if r.ContentLength != -1 || len(r.TransferEncoding) != 1 || r.body != big {
				t.Fatalf("Content-Length %d, Transfer-Encoding %v, %d bytes", r.ContentLength, r.TransferEncoding, len(r.body))
			}
		}},
		{"the handler's Content-Length", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", "5000")
			_, _ = io.WriteString(w, big)
		}), "GET / HTTP/1.1\r\nHost: x\r\n\r\n", func(t *testing.T, c *client) {
			r := c.read("GET")
			if r.ContentLength != 5000 || len(r.TransferEncoding) != 0 || r.body != big {
				t.Fatalf("Content-Length %d, Transfer-Encoding %v", r.ContentLength, r.TransferEncoding)
			}
		}},
		{"a flushed reply is chunked", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "a")
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, "b")
		}), "GET / HTTP/1.1\r\nHost: x\r\n\r\n", func(t *testing.T, c *client) {
			r := c.read("GET")
			if len(r.TransferEncoding) != 1 || r.body != "ab" {
				t.Fatalf("Transfer-Encoding %v, body %q", r.TransferEncoding, r.body)
			}
		}},
		{"HEAD has no body", echo, "HEAD / HTTP/1.1\r\nHost: x\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\n\r\n", func(t *testing.T, c *client) {
			r := c.read("HEAD")
			if r.ContentLength != int64(len("HEAD / ")) || r.body != "" {
				t.Fatalf("Content-Length %d, body %q", r.ContentLength, r.body)
			}
			if r := c.read("GET"); r.body != "GET /after " {
				t.Fatalf("next: %q", r.body)
			}
		}},
		{"204 has no body", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusNoContent)
			if _, err := io.WriteString(w, "x"); err != http.ErrBodyNotAllowed { //nolint:errorlint // the sentinel as is
				panic(fmt.Sprintf("write: %v", err))
			}
		}), "GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", func(t *testing.T, c *client) {
			for range 2 {
				r := c.read("GET")
				if r.StatusCode != http.StatusNoContent || r.Header.Get("Content-Length") != "" || len(r.TransferEncoding) != 0 {
					t.Fatalf("%d, header %v", r.StatusCode, r.Header)
				}
			}
		}},
		{"Connection: close from the client", echo, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", func(t *testing.T, c *client) {
			if r := c.read("GET"); !r.Close {
				t.Fatal("no Connection: close")
			}
			if !c.closed() {
				t.Fatal("the connection stays open")
			}
		}},
		{"Connection: close from the handler", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Connection", "close")
		}), "GET / HTTP/1.1\r\nHost: x\r\n\r\n", func(t *testing.T, c *client) {
			if r := c.read("GET"); !r.Close {
				t.Fatal("no Connection: close")
			}
			if !c.closed() {
				t.Fatal("the connection stays open")
			}
		}},
		{"HTTP/1.0 closes", echo, "GET / HTTP/1.0\r\n\r\n", func(t *testing.T, c *client) {
			if r := c.read("GET"); r.body != "GET / " {
				t.Fatalf("body %q", r.body)
			}
			if !c.closed() {
				t.Fatal("the connection stays open")
			}
		}},
		{"HTTP/1.0 keep-alive", echo, "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", func(t *testing.T, c *client) {
			r := c.read("GET")
			if r.Header.Get("Connection") != "keep-alive" || r.ContentLength != int64(len("GET /a ")) {
				t.Fatalf("Connection %q, Content-Length %d", r.Header.Get("Connection"), r.ContentLength)
			}
			c.send("GET /b HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
			if r := c.read("GET"); r.body != "GET /b " {
				t.Fatalf("second: %q", r.body)
			}
		}},
		{"HTTP/1.0 large reply is delimited by the close", write(big), "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", func(t *testing.T, c *client) {
			r := c.read("GET")
			if r.ContentLength != -1 || len(r.TransferEncoding) != 0 || r.body != big {
				t.Fatalf("Content-Length %d, Transfer-Encoding %v, %d bytes", r.ContentLength, r.TransferEncoding, len(r.body))
			}
		}},
		{"an unsupported expectation is 417", echo, "POST / HTTP/1.1\r\nHost: x\r\nExpect: something\r\nContent-Length: 1\r\n\r\nx", func(t *testing.T, c *client) {
			checkEnvelope(t, c, http.StatusExpectationFailed, "invalid_request")
		}},
		{"no Host is 400", echo, "GET / HTTP/1.1\r\n\r\n", func(t *testing.T, c *client) {
			checkEnvelope(t, c, http.StatusBadRequest, "invalid_request")
		}},
		{"oversize headers are 431", echo, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 70<<10) + "\r\n\r\n", func(t *testing.T, c *client) {
			checkEnvelope(t, c, http.StatusRequestHeaderFieldsTooLarge, "request_too_large")
		}},
		{"a malformed request line is 400", echo, "GARBAGE\r\n\r\n", func(t *testing.T, c *client) {
			checkEnvelope(t, c, http.StatusBadRequest, "invalid_request")
		}},
		{"an unknown transfer coding is 501", echo, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", func(t *testing.T, c *client) {
			checkEnvelope(t, c, http.StatusNotImplemented, "invalid_request")
		}},
		{"conflicting Content-Lengths are 400", echo, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", func(t *testing.T, c *client) {
			checkEnvelope(t, c, http.StatusBadRequest, "invalid_request")
		}},
		{"HTTP/2.0 is 505", echo, "GET / HTTP/2.0\r\nHost: x\r\n\r\n", func(t *testing.T, c *client) {
			checkEnvelope(t, c, http.StatusHTTPVersionNotSupported, "invalid_request")
		}},
		{"OPTIONS * reaches the handler", echo, "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", func(t *testing.T, c *client) {
			if r := c.read("OPTIONS"); r.body != "OPTIONS * " {
				t.Fatalf("body %q", r.body)
			}
		}},
		{"Date and a sniffed Content-Type", write("<html><body>hi</body></html>"), "GET / HTTP/1.1\r\nHost: x\r\n\r\n", func(t *testing.T, c *client) {
			r := c.read("GET")
			if ct := r.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
				t.Fatalf("Content-Type %q", ct)
			}
			if d, err := http.ParseTime(r.Header.Get("Date")); err != nil || time.Since(d) > time.Hour {
				t.Fatalf("Date %q: %v", r.Header.Get("Date"), err)
			}
		}},
		{"an unread small body is drained", write("ok"), "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + strings.Repeat("b", 1000) + "GET /next HTTP/1.1\r\nHost: x\r\n\r\n", func(t *testing.T, c *client) {
			if r := c.read("POST"); r.Close || r.body != "ok" {
				t.Fatalf("close=%v body %q", r.Close, r.body)
			}
			if r := c.read("GET"); r.body != "ok" {
				t.Fatalf("next: %q", r.body)
			}
		}},
		{"an unread large body closes", write("ok"), "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n" + strings.Repeat("b", 1000), func(t *testing.T, c *client) {
			if r := c.read("POST"); !r.Close || r.body != "ok" {
				t.Fatalf("close=%v body %q", r.Close, r.body)
			}
			if !c.closed() {
				t.Fatal("the connection stays open")
			}
		}},
		{"a second WriteHeader is ignored", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusCreated)
			w.WriteHeader(http.StatusTeapot)
		}), "GET / HTTP/1.1\r\nHost: x\r\n\r\n", func(t *testing.T, c *client) {
			if r := c.read("GET"); r.StatusCode != http.StatusCreated {
				t.Fatalf("status %d", r.StatusCode)
			}
		}},
		{"a 1xx passes through", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Link", "</a.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			_, _ = io.WriteString(w, "done")
		}), "GET / HTTP/1.1\r\nHost: x\r\n\r\n", func(t *testing.T, c *client) {
			line, _ := c.br.ReadString('\n')
			if line != "HTTP/1.1 103 Early Hints\r\n" {
				t.Fatalf("first line %q", line)
			}
			for line != "\r\n" {
				line, _ = c.br.ReadString('\n')
			}
			if r := c.read("GET"); r.StatusCode != http.StatusOK || r.body != "done" {
				t.Fatalf("%d %q", r.StatusCode, r.body)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, addr, _ := start(t, tt.handler)
			c := dial(t, addr)
			c.send(tt.send)
			tt.check(t, c)
		})
	}
}

func write(s string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, s) })
}

// checkEnvelope reads an error the server answered itself: the status,
// the gateway's error envelope, and the connection closed.
func checkEnvelope(t *testing.T, c *client, status int, code string) {
	t.Helper()
	r := c.read("GET")
	if r.StatusCode != status || r.Header.Get("Content-Type") != "application/json" || !r.Close {
		t.Fatalf("%d, Content-Type %q, close=%v; want %d", r.StatusCode, r.Header.Get("Content-Type"), r.Close, status)
	}
	var env openai.ErrorResponse
	if err := json.Unmarshal([]byte(r.body), &env); err != nil || env.Error == nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	if env.Error.Code != code || env.Error.Type != "invalid_request_error" || env.Error.Message == "" {
		t.Fatalf("envelope %+v", env.Error)
	}
	if !c.closed() {
		t.Fatal("the connection stays open")
	}
}

// TestDeadlinesReset: a write deadline a handler leaves set does not
// outlive its response (the edge sets one before each write).
func TestDeadlinesReset(t *testing.T) {
	_, addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "2")
		_, _ = io.WriteString(w, "ok")
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		if r.URL.Path == "/past" {
			_ = rc.SetWriteDeadline(time.Unix(1, 0))
		}
	}))
	c := dial(t, addr)
	c.send("GET /past HTTP/1.1\r\nHost: x\r\n\r\n")
	c.read("GET")
	c.send("GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
	if r := c.read("GET"); r.body != "ok" {
		t.Fatalf("next: %q", r.body)
	}
}
