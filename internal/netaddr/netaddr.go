// Package netaddr answers questions about listen addresses.
package netaddr

import "net"

// IsLoopback reports whether a listen address (host:port) is on loopback
// only: localhost or a loopback IP. An empty host listens everywhere.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
