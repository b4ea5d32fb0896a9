package portal

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Sign-ins (and password changes) per client address: a bucket of
// SignInsPerAddress attempts (DefaultSignInsPerAddress), refilled at that
// many a minute, so that one address cannot keep the password-check slots
// busy for everyone. An IPv6 client counts by its /64, which one site
// typically holds whole. At most addrMaxEntries addresses are tracked;
// when full, the one seen longest ago is forgotten.
const (
	DefaultSignInsPerAddress = 10
	addrMaxEntries           = 10_000
)

type addrBucket struct {
	tokens float64
	last   time.Time
}

type addrLimiter struct {
	mu      sync.Mutex
	burst   float64
	refill  time.Duration // per attempt
	entries map[string]addrBucket
}

// newAddrLimiter allows burst attempts at once and burst a minute; below
// 1, DefaultSignInsPerAddress.
func newAddrLimiter(burst int) *addrLimiter {
	if burst < 1 {
		burst = DefaultSignInsPerAddress
	}
	return &addrLimiter{burst: float64(burst), refill: time.Minute / time.Duration(burst), entries: make(map[string]addrBucket)}
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
		b.tokens = min(a.burst, b.tokens+float64(elapsed)/float64(a.refill))
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

// clientAddr is the address a request came from, as the limit and the logs
// name it. Behind a reverse proxy on the same host (a public origin is set
// and the connection comes from loopback), it is the last X-Forwarded-For
// entry, the one the proxy appended; a connection from elsewhere is named
// by its own address, whatever header it sends, since it could name any
// address there.
func (s *Server) clientAddr(r *http.Request) string {
	remote := r.RemoteAddr
	if host, _, err := net.SplitHostPort(remote); err == nil {
		remote = host
	}
	if s.cfg.PublicOrigin == "" {
		return addrKey(remote)
	}
	if ip := net.ParseIP(remote); ip == nil || !ip.IsLoopback() {
		return addrKey(remote)
	}
	xff := r.Header.Values("X-Forwarded-For")
	if len(xff) == 0 {
		return addrKey(remote)
	}
	last := xff[len(xff)-1]
	if i := strings.LastIndexByte(last, ','); i >= 0 {
		last = last[i+1:]
	}
	return addrKey(strings.TrimSpace(last))
}

// addrKey names an address for the limit: an IP (with or without a port,
// or brackets) as its canonical form, an IPv6 address by its /64; anything
// else as given, cut to 64 bytes, so that an entry that does not parse is
// still its own client rather than the proxy's.
func addrKey(s string) string {
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	s = strings.Trim(s, "[]")
	if i := strings.IndexByte(s, '%'); i >= 0 {
		s = s[:i] // a zone
	}
	ip := net.ParseIP(s)
	switch {
	case ip == nil:
		return s[:min(len(s), 64)]
	case ip.To4() != nil:
		return ip.To4().String()
	default:
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
}
