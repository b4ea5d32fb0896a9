// Package connlimit bounds the connections a listener has open at once,
// in all and from any one remote address.
//
// Unlike golang.org/x/net/netutil.LimitListener, which stops accepting at
// the limit and so leaves the excess waiting in the kernel's backlog (where
// their clients see a connection that never answers), a Listener accepts
// the excess and closes it at once: a refused client learns so promptly,
// and the backlog stays free for the connections that will fit.
package connlimit

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// Options configure a Listener.
type Options struct {
	// Max is the most connections open at once (at least 1).
	Max int
	// MaxPerHost, when above 0, is the most connections open at once from
	// one remote IP address (TCP connections; others are not counted per
	// address). Connections count before they authenticate, so without it
	// one host could take every slot and keep other clients out.
	MaxPerHost int
	// OnRefuse, when set, is called after a connection is refused, with
	// the number refused since one was last accepted (1 for the first of a
	// run), and the remote address when it was refused for MaxPerHost
	// (invalid when for Max). It is called from Accept and must not block.
	OnRefuse func(inARow uint64, host netip.Addr)
	// OnRelease, when set, is called once a connection has been closed and
	// its slot is free again.
	OnRelease func()
}

// Listener accepts at most Options.Max connections open at once; a
// connection beyond them is closed as soon as it is accepted. A slot is
// free again once its connection is closed.
type Listener struct {
	net.Listener
	opts    Options
	slots   chan struct{}
	refused atomic.Uint64
	inARow  atomic.Uint64

	mu sync.Mutex
	// perHost counts the open connections of each remote address that
	// has any (MaxPerHost > 0): at most Max entries.
	perHost map[netip.Addr]int
}

// New bounds the connections of l; Max below 1 counts as 1.
func New(l net.Listener, opts Options) *Listener {
	opts.Max = max(opts.Max, 1)
	return &Listener{Listener: l, opts: opts, slots: make(chan struct{}, opts.Max), perHost: make(map[netip.Addr]int)}
}

// Accept returns the next connection that fits, closing those that do not
// as they arrive.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host, ok := l.takeHost(c)
		if !ok {
			l.refuse(c, host)
			continue
		}
		select {
		case l.slots <- struct{}{}:
			l.inARow.Store(0)
			return &conn{Conn: c, l: l, host: host}, nil
		default:
		}
		l.releaseHost(host)
		l.refuse(c, netip.Addr{})
	}
}

// refuse counts c as refused, for MaxPerHost (host valid) or Max, and
// closes it: once its client sees it closed, the refusal is counted and
// OnRefuse has returned.
func (l *Listener) refuse(c net.Conn, host netip.Addr) {
	l.refused.Add(1)
	n := l.inARow.Add(1)
	if l.opts.OnRefuse != nil {
		l.opts.OnRefuse(n, host)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		// A reset rather than a FIN: no TIME_WAIT is left on this side
		// for each refused connection.
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// takeHost counts c against its remote address's MaxPerHost; it returns
// the address counted (invalid when none is: no per-address bound, or
// not TCP), or the address and false when that address is at its bound.
func (l *Listener) takeHost(c net.Conn) (netip.Addr, bool) {
	if l.opts.MaxPerHost <= 0 {
		return netip.Addr{}, true
	}
	ta, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, true
	}
	host := ta.AddrPort().Addr().Unmap()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perHost[host] >= l.opts.MaxPerHost {
		return host, false
	}
	l.perHost[host]++
	return host, true
}

// releaseHost gives back a connection counted by takeHost.
func (l *Listener) releaseHost(host netip.Addr) {
	if !host.IsValid() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perHost[host] <= 1 {
		delete(l.perHost, host)
		return
	}
	l.perHost[host]--
}

// Refused is how many connections have been refused.
func (l *Listener) Refused() uint64 { return l.refused.Load() }

// Open is how many accepted connections are not closed yet.
func (l *Listener) Open() int { return len(l.slots) }

// conn frees its slot when first closed.
type conn struct {
	net.Conn
	l    *Listener
	host netip.Addr // counted against MaxPerHost when valid
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.releaseHost(c.host)
		<-c.l.slots
		if c.l.opts.OnRelease != nil {
			c.l.opts.OnRelease()
		}
	})
	return err
}
