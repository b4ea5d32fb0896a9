package vllm_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/server/inference/vllm"
)

// TestWriteRequestBytes holds the transport's request writer to
// (*http.Request).Write: the same bytes and the same failures, for the
// requests it writes itself and for those it leaves to net/http.
func TestWriteRequestBytes(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	long := strings.Repeat("x", 10<<10) // past the connection's 4 KiB buffer
	cases := []struct {
		name    string
		method  string
		url     string
		body    string
		header  http.Header
		edit    func(*http.Request) *http.Request
		written bool // by the transport itself
	}{
		{name: "the engine's chat request", method: http.MethodPost, url: "http://127.0.0.1:8000/v1/chat/completions", body: body,
			header: http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json"}, "X-Request-Id": {"req_01"},
				"Authorization": {"Bearer k"}, "Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}, written: true},
		{name: "no header", method: http.MethodPost, url: "http://h/p", body: body, written: true},
		{name: "a long body", method: http.MethodPost, url: "http://h:1/p", body: long, header: http.Header{"A": {"1"}}, written: true},
		{name: "a query and an escaped path", method: http.MethodPost, url: "http://h/a%20b/c?x=1&y=%2F", body: body, written: true},
		{name: "an IPv6 host", method: http.MethodPost, url: "http://[::1]:8000/v1", body: body, written: true},
		{name: "values in order, keys sorted, empty value", method: http.MethodPost, url: "http://h/p", body: body,
			header: http.Header{"Zed": {"2", "1"}, "Alpha": {""}, "lower-case": {"v"}, "M": {"x y"}}, written: true},
		{name: "an invalid name dropped, excluded names", method: http.MethodPost, url: "http://h/p", body: body,
			header: http.Header{"Bad Name": {"v"}, "Host": {"other"}, "Content-Length": {"9"}, "Trailer": {"T"}, "Transfer-Encoding": {"gzip"}}, written: true},
		{name: "a value net/http rewrites", method: http.MethodPost, url: "http://h/p", body: body,
			header: http.Header{"A": {" padded\t"}, "B": {"two\r\nlines"}}},
		{name: "a User-Agent", method: http.MethodPost, url: "http://h/p", body: body, header: http.Header{"User-Agent": {"me"}}},
		{name: "a GET", method: http.MethodGet, url: "http://h/v1/models"},
		{name: "an empty POST", method: http.MethodPost, url: "http://h/p"},
		{name: "a unicode host", method: http.MethodPost, url: "http://bücher.example/p", body: body},
		{name: "Close", method: http.MethodPost, url: "http://h/p", body: body,
			edit: func(r *http.Request) *http.Request { r.Close = true; return r }},
		{name: "a Host set", method: http.MethodPost, url: "http://h/p", body: body,
			edit: func(r *http.Request) *http.Request { r.Host = "other:81"; return r }, written: true},
		{name: "no Host but the URL's", method: http.MethodPost, url: "http://h/p", body: body,
			edit: func(r *http.Request) *http.Request { r.Host = ""; return r }, written: true},
		{name: "a Host net/http would not write as is", method: http.MethodPost, url: "http://h/p", body: body,
			edit: func(r *http.Request) *http.Request { r.Host = "bad host"; return r }},
		{name: "a body that cannot be replayed", method: http.MethodPost, url: "http://h/p", body: body,
			edit: func(r *http.Request) *http.Request {
				r.GetBody = nil
				r.Body = io.NopCloser(strings.NewReader(body))
				return r
			}},
		{name: "a client trace", method: http.MethodPost, url: "http://h/p", body: body,
			edit: func(r *http.Request) *http.Request {
				return r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{}))
			}},
		{name: "a body longer than its length", method: http.MethodPost, url: "http://h/p", body: body,
			edit: func(r *http.Request) *http.Request { r.ContentLength -= 5; return r }, written: true},
		{name: "a body shorter than its length", method: http.MethodPost, url: "http://h/p", body: body,
			edit: func(r *http.Request) *http.Request { r.ContentLength += 5; return r }, written: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			build := func() *http.Request {
				var rd io.Reader
				if c.body != "" {
					rd = strings.NewReader(c.body)
				}
				req, err := http.NewRequestWithContext(context.Background(), c.method, c.url, rd)
				if err != nil {
					t.Fatal(err)
				}
				for k, vv := range c.header {
					req.Header[k] = vv
				}
				if c.edit != nil {
					req = c.edit(req)
				}
				return req
			}
			if got := vllm.Written(build()); got != c.written {
				t.Fatalf("written by the transport: %v, want %v", got, c.written)
			}
			var want, got bytes.Buffer
			ww, gw := bufio.NewWriterSize(&want, 4<<10), bufio.NewWriterSize(&got, 4<<10)
			wantErr := build().Write(ww)
			gotErr := vllm.WriteRequest(gw, build())
			_, _ = ww.Flush(), gw.Flush()
			if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
				t.Fatalf("error %v, want %v", gotErr, wantErr)
			}
			if got.String() != want.String() {
				t.Errorf("wrote\n%q\nwant\n%q", got.String(), want.String())
			}
		})
	}
}

// TestWriteRequestClosesBody: the body is closed, as req.Write closes it.
func TestWriteRequestClosesBody(t *testing.T) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://h/p", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	b := &closeCounter{Reader: strings.NewReader("{}")}
	req.Body = b
	if !vllm.Written(req) {
		t.Fatal("the request is not written by the transport")
	}
	if err := vllm.WriteRequest(bufio.NewWriter(io.Discard), req); err != nil {
		t.Fatal(err)
	}
	if b.closed != 1 {
		t.Errorf("body closed %d times, want 1", b.closed)
	}
}

type closeCounter struct {
	io.Reader
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

func BenchmarkWriteRequest(b *testing.B) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	w := bufio.NewWriterSize(io.Discard, 4<<10)
	for _, bc := range []struct {
		name  string
		write func(*bufio.Writer, *http.Request) error
	}{
		{"net/http", func(w *bufio.Writer, r *http.Request) error { return r.Write(w) }},
		{"transport", vllm.WriteRequest},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://127.0.0.1:8000/v1/chat/completions", bytes.NewReader(body))
				req.Header["Content-Type"] = []string{"application/json"}
				req.Header["Accept"] = []string{"application/json"}
				req.Header["X-Request-Id"] = []string{"req_01"}
				if err := bc.write(w, req); err != nil {
					b.Fatal(err)
				}
				w.Reset(io.Discard)
			}
		})
	}
}
