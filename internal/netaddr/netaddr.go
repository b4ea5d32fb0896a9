// Package netaddr answers questions about listen addresses and the
// listeners on them.
package netaddr

import (
	"crypto/tls"
	"net"
	"strings"
)

// IsLoopback reports whether a listen address (host:port) is on loopback
// only: localhost or a loopback IP. An empty host listens everywhere.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	return IsLoopbackHost(host)
}

// IsLoopbackHost reports whether host (a name, an IP, or an IPv6 literal
// in brackets, as a Host header carries it) names loopback: localhost or a
// loopback IP.
func IsLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return ip != nil && ip.IsLoopback()
}

// HTTP1Listener wraps l in TLS with cfg, offering HTTP/1.1 only (ALPN) at
// TLS 1.2 or later; cfg itself is left as it was. The gateway's and the
// central REST API's servers bound each connection's writes (a write
// stall, an answer's deadline), which assume one request at a time per
// connection, as HTTP/1.1 has; the OpenAI SDKs and generated REST clients
// speak it to a server that offers nothing else.
func HTTP1Listener(l net.Listener, cfg *tls.Config) net.Listener {
	c := cfg.Clone()
	c.NextProtos = []string{"http/1.1"}
	c.MinVersion = max(c.MinVersion, tls.VersionTLS12)
	return tls.NewListener(l, c)
}
