//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package vllm

import "net"

// peekAlive cannot look at the socket here: an idle connection the server
// closed is found by the request that uses it, and retried under
// Transport's rule.
func peekAlive(net.Conn) bool { return true }
