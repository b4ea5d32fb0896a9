package portal

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Sign-ins per client address: a bucket of DefaultSignInsPerAddress
// attempts, one more every addrRefill (DefaultSignInsPerAddress a
// minute), so that one address cannot keep the password-check slots busy
// for everyone. At most addrMaxEntries addresses are tracked; when full,
// the one seen longest ago is forgotten.
const (
	DefaultSignInsPerAddress = 10
	addrRefill               = time.Minute / DefaultSignInsPerAddress
	addrMaxEntries           = 10_000
)

type addrBucket struct {
	tokens float64
	last   time.Time
}

type addrLimiter struct {
	mu      sync.Mutex
	burst   float64
	entries map[string]addrBucket
}

func newAddrLimiter(burst int) *addrLimiter {
	return &addrLimiter{burst: float64(burst), entries: make(map[string]addrBucket)}
}

// allow takes one attempt from addr's bucket at now, if it has one.
func (a *addrLimiter) allow(addr string, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, ok := a.entries[addr]
	if !ok {
		if len(a.entries) >= addrMaxEntries {
			evictOldest(a.entries, func(v addrBucket) time.Time { return v.last })
		}
		b = addrBucket{tokens: a.burst, last: now}
	}
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = min(a.burst, b.tokens+float64(elapsed)/float64(addrRefill))
		b.last = now
	}
	if b.tokens < 1 {
		a.entries[addr] = b
		return false
	}
	b.tokens--
	a.entries[addr] = b
	return true
}

// clientAddr is the address a request came from: behind a reverse proxy
// (a public origin is set, and the portal then listens on loopback or
// with its own TLS for the proxy), the last X-Forwarded-For entry, which
// the proxy appended; otherwise the connection's address.
func (s *Server) clientAddr(r *http.Request) string {
	if s.cfg.PublicOrigin != "" {
		if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
			last := xff[len(xff)-1]
			if i := strings.LastIndexByte(last, ','); i >= 0 {
				last = last[i+1:]
			}
			if ip := net.ParseIP(strings.TrimSpace(last)); ip != nil {
				return ip.String()
			}
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
