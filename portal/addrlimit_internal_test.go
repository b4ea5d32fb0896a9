package portal

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestAddrKey(t *testing.T) {
	for in, want := range map[string]string{
		"203.0.113.7":           "203.0.113.7",
		"203.0.113.7:5123":      "203.0.113.7",
		"::ffff:203.0.113.7":    "203.0.113.7",
		"[2001:db8::1]:443":     "2001:db8::/64",
		"2001:db8::1":           "2001:db8::/64",
		"2001:db8::ffff:1:2:3":  "2001:db8::/64",
		"fe80::1%eth0":          "fe80::/64",
		"unknown":               "unknown",
		strings.Repeat("x", 99): strings.Repeat("x", 64),
	} {
		if got := addrKey(in); got != want {
			t.Errorf("addrKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// X-Forwarded-For names the client only behind a proxy on the same host:
// a public origin set and the connection from loopback.
func TestClientAddr(t *testing.T) {
	for _, tc := range []struct {
		name, origin, remote, xff, want string
	}{
		{"no proxy", "", "127.0.0.1:4000", "198.51.100.1", "127.0.0.1"},
		{"proxy on loopback", "https://p.example", "127.0.0.1:4000", "10.0.0.9, 198.51.100.1", "198.51.100.1"},
		{"proxy, entry with a port", "https://p.example", "[::1]:4000", "198.51.100.1:5555", "198.51.100.1"},
		{"direct client sending the header", "https://p.example", "192.0.2.5:4000", "198.51.100.1", "192.0.2.5"},
		{"proxy without the header", "https://p.example", "127.0.0.1:4000", "", "127.0.0.1"},
	} {
		s := &Server{cfg: Config{PublicOrigin: tc.origin}}
		r := httptest.NewRequest(http.MethodPost, "/login", nil)
		r.RemoteAddr = tc.remote
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got := s.clientAddr(r); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A limit of n allows n at once and n a minute.
func TestAddrLimiterRefill(t *testing.T) {
	a := newAddrLimiter(20)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range 20 {
		if !a.allow("a", now) {
			t.Fatalf("attempt %d refused", i+1)
		}
	}
	if a.allow("a", now) {
		t.Fatal("attempt 21 allowed")
	}
	if !a.allow("a", now.Add(time.Minute/20)) || a.allow("a", now.Add(time.Minute/20)) {
		t.Fatal("not one more after a twentieth of a minute")
	}
	if b := newAddrLimiter(-3); b.burst != DefaultSignInsPerAddress {
		t.Fatalf("a negative limit: burst %v", b.burst)
	}
}

func TestCanonicalOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"https://Portal.Example.com":      "https://portal.example.com",
		"https://portal.example.com:443/": "https://portal.example.com",
		"http://portal.example.com:80":    "http://portal.example.com",
		"https://portal.example.com:8443": "https://portal.example.com:8443",
		"https://[2001:DB8::1]:8443":      "https://[2001:db8::1]:8443",
	} {
		if got, err := canonicalOrigin(in); err != nil || got != want {
			t.Errorf("canonicalOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"https://portal.example.com?", "https://portal.example.com/#x", "https://u@portal.example.com", "https:portal"} {
		if _, err := canonicalOrigin(bad); err == nil {
			t.Errorf("canonicalOrigin(%q) accepted", bad)
		}
	}
}

func TestThrottleUndo(t *testing.T) {
	th := newThrottle()
	now := time.Now()
	for range throttleFailures {
		th.attempt("acme", "alice", now)
	}
	th.undo("acme", "alice") // the last was never checked
	if !th.attempt("acme", "alice", now) {
		t.Fatal("an undone attempt still counts")
	}
	if th.attempt("acme", "alice", now) {
		t.Fatal("not locked after 5 checks")
	}
}
