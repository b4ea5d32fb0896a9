package h1server

import (
	"net/http"
	"strings"
	"testing"
)

// TestPanic: a handler's panic closes its connection, logged with its
// stack; http.ErrAbortHandler silently; the server serves on.
func TestPanic(t *testing.T) {
	tests := []struct {
		name   string
		value  any
		logged bool
	}{
		{"logged with the stack", "boom", true},
		{"ErrAbortHandler is silent", http.ErrAbortHandler, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, addr, logs := start(t, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/panic" {
					panic(tt.value)
				}
			}))
			c := dial(t, addr)
			c.send("GET /panic HTTP/1.1\r\nHost: x\r\n\r\n")
			if !c.closed() {
				t.Fatal("the connection stays open")
			}
			got := logs.String()
			if logged := strings.Contains(got, "panic serving") && strings.Contains(got, "goroutine"); logged != tt.logged {
				t.Fatalf("logged %v, want %v: %s", logged, tt.logged, got)
			}
			c = dial(t, addr)
			c.send("GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
			if r := c.read("GET"); r.StatusCode != http.StatusOK {
				t.Fatalf("after the panic: %d", r.StatusCode)
			}
		})
	}
}
