//go:build linux || darwin || freebsd || netbsd || openbsd

package vllm

import (
	"net"
	"syscall"
)

// peekAlive says whether a kept-alive connection is still open with
// nothing to read: a non-blocking MSG_PEEK of one byte, one system call
// and no wake-up. net/http learns the same from the read goroutine it
// keeps blocked on each idle connection; this transport has none.
// Anything readable on an idle connection (an EOF, a reset, bytes no
// request asked for) makes it unusable.
func peekAlive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// Nothing to read yet is the one answer of a live idle
		// connection; bytes (n > 0), the end (n == 0) or an error are not.
		alive = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		return true // an answer either way: never wait for the socket
	})
	return err == nil && alive
}
