package h1server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
)

// BenchmarkKeepAlive is one request after another over one kept
// connection, a small JSON body in and out, served by net/http and by
// h1server (the allocations include the client's, the same for both).
func BenchmarkKeepAlive(b *testing.B) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "req_0123456789")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","choices":[]}`)
	})
	req := "POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer tg_key\r\nContent-Type: application/json\r\nContent-Length: 62\r\n\r\n" +
		`{"model":"builtin/echo","messages":[{"role":"user","content":"hi"}]}`[:62]
	servers := []struct {
		name  string
		serve func(b *testing.B, l net.Listener)
	}{
		{"net/http", func(b *testing.B, l net.Listener) {
			srv := &http.Server{Handler: h}
			go func() { _ = srv.Serve(l) }()
			b.Cleanup(func() { _ = srv.Close() })
		}},
		{"h1server", func(b *testing.B, l net.Listener) {
			srv := &Server{Handler: h}
			go func() { _ = srv.Serve(l) }()
			b.Cleanup(func() { _ = srv.Close() })
		}},
	}
	for _, s := range servers {
		b.Run(s.name, func(b *testing.B) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			s.serve(b, l)
			c, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			br := bufio.NewReader(c)
			get := &http.Request{Method: http.MethodPost}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := io.WriteString(c, req); err != nil {
					b.Fatal(err)
				}
				resp, err := http.ReadResponse(br, get)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}
