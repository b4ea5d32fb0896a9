package connlimit_test

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/connlimit"
)

// hangGuard bounds every wait for an event; it is not a timing
// expectation.
const hangGuard = time.Minute

// awaitRefused connects to addr and waits for the server to close the
// connection: the connect itself is reset, or a read ends without data.
func awaitRefused(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if errors.Is(err, syscall.ECONNRESET) {
		return // reset before the connect returned
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetReadDeadline(time.Now().Add(hangGuard)); err != nil {
		t.Fatal(err)
	}
	n, err := c.Read(make([]byte, 1))
	if n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a refused connection: read %d bytes, %v; want it closed by the server", n, err)
	}
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	return dialFrom(t, "", addr)
}

// dialFrom connects to addr from the loopback address from (any of
// 127.0.0.0/8 is this host's; empty: the system's choice).
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	var d net.Dialer
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// acceptAll accepts l's connections into the channel it returns, until
// Accept fails (the listener closed), when it closes the channel.
func acceptAll(l net.Listener) <-chan net.Conn {
	accepted := make(chan net.Conn, 8)
	go func() {
		defer close(accepted)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	return accepted
}

// TestListener: beyond Max open connections, each new one is accepted and
// closed at once (counted, OnRefuse with the run's length) while Accept
// goes on waiting; closing an accepted connection, once or twice, frees
// one slot, and the next connection is accepted.
func TestListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusals := make(chan uint64, 8)
	released := make(chan struct{}, 8)
	l := connlimit.New(inner, connlimit.Options{
		Max: 2,
		OnRefuse: func(n uint64, host netip.Addr) {
			if host.IsValid() {
				t.Errorf("refused for its host %s without MaxPerHost", host)
			}
			refusals <- n
		},
		OnRelease: func() { released <- struct{}{} },
	})
	t.Cleanup(func() { _ = l.Close() })
	accepted := acceptAll(l)
	next := func() net.Conn {
		t.Helper()
		select {
		case c := <-accepted:
			return c
		case <-time.After(hangGuard):
			t.Fatal("no connection accepted")
			return nil
		}
	}
	refused := func(want uint64) {
		t.Helper()
		select {
		case n := <-refusals:
			if n != want {
				t.Fatalf("refused %d in a row, want %d", n, want)
			}
		case <-time.After(hangGuard):
			t.Fatal("no connection refused")
		}
	}

	dial(t, inner.Addr().String())
	first := next()
	dial(t, inner.Addr().String())
	next()
	for i := range 2 {
		awaitRefused(t, inner.Addr().String())
		refused(uint64(i + 1))
	}
	if l.Refused() != 2 || l.Open() != 2 {
		t.Fatalf("refused %d, open %d; want 2 and 2", l.Refused(), l.Open())
	}

	_ = first.Close()
	_ = first.Close()
	<-released
	if l.Open() != 1 {
		t.Fatalf("open %d after closing one of 2 twice, want 1", l.Open())
	}
	select {
	case <-released:
		t.Fatal("a connection closed twice freed two slots")
	default:
	}
	dial(t, inner.Addr().String())
	next()
	awaitRefused(t, inner.Addr().String())
	refused(1)
	if l.Refused() != 3 || l.Open() != 2 {
		t.Fatalf("refused %d, open %d; want 3 and 2", l.Refused(), l.Open())
	}
}

// TestListenerPerHost: beyond MaxPerHost open connections from one
// address, its next is refused (OnRefuse names it) while other addresses
// are still accepted; closing one of its connections lets it connect
// again.
func TestListenerPerHost(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := inner.Addr().String()
	refusals := make(chan netip.Addr, 8)
	l := connlimit.New(inner, connlimit.Options{
		Max:        4,
		MaxPerHost: 2,
		OnRefuse:   func(_ uint64, host netip.Addr) { refusals <- host },
	})
	t.Cleanup(func() { _ = l.Close() })
	accepted := acceptAll(l)
	next := func(from string) net.Conn {
		t.Helper()
		select {
		case c := <-accepted:
			if got := c.RemoteAddr().(*net.TCPAddr).IP.String(); got != from {
				t.Fatalf("accepted a connection from %s, want %s", got, from)
			}
			return c
		case <-time.After(hangGuard):
			t.Fatalf("no connection from %s accepted", from)
			return nil
		}
	}

	dialFrom(t, "127.0.0.1", addr)
	first := next("127.0.0.1")
	dialFrom(t, "127.0.0.1", addr)
	next("127.0.0.1")
	// The third from 127.0.0.1 is refused, naming it.
	awaitRefused(t, addr)
	select {
	case host := <-refusals:
		if host != netip.MustParseAddr("127.0.0.1") {
			t.Fatalf("refused for host %s, want 127.0.0.1", host)
		}
	case <-time.After(hangGuard):
		t.Fatal("no refusal")
	}
	// Another address still gets in.
	dialFrom(t, "127.0.0.2", addr)
	next("127.0.0.2")
	// A closed connection gives its address a slot back.
	_ = first.Close()
	dialFrom(t, "127.0.0.1", addr)
	next("127.0.0.1")
	if l.Open() != 3 || l.Refused() != 1 {
		t.Fatalf("open %d, refused %d; want 3 and 1", l.Open(), l.Refused())
	}
}
