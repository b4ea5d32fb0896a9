// Package connlimit bounds the connections a listener has open at once.
//
// Unlike golang.org/x/net/netutil.LimitListener, which stops accepting at
// the limit and so leaves the excess waiting in the kernel's backlog (where
// their clients see a connection that never answers), a Listener accepts
// the excess and closes it at once: a refused client learns so promptly,
// and the backlog stays free for the connections that will fit.
package connlimit

import (
	"net"
	"sync"
	"sync/atomic"
)

// Options configure a Listener.
type Options struct {
	// Max is the most connections open at once (at least 1).
	Max int
	// OnRefuse, when set, is called after a connection is refused, with
	// the number refused since one was last accepted (1 for the first of a
	// run). It is called from Accept and must not block.
	OnRefuse func(inARow uint64)
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
}

// New bounds the connections of l; Max below 1 counts as 1.
func New(l net.Listener, opts Options) *Listener {
	opts.Max = max(opts.Max, 1)
	return &Listener{Listener: l, opts: opts, slots: make(chan struct{}, opts.Max)}
}

// Accept returns the next connection that fits, closing those that do not
// as they arrive.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			l.inARow.Store(0)
			return &conn{Conn: c, l: l}, nil
		default:
		}
		if tc, ok := c.(*net.TCPConn); ok {
			// A reset rather than a FIN: no TIME_WAIT is left on this side
			// for each refused connection.
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
		l.refused.Add(1)
		n := l.inARow.Add(1)
		if l.opts.OnRefuse != nil {
			l.opts.OnRefuse(n)
		}
	}
}

// Refused is how many connections have been refused.
func (l *Listener) Refused() uint64 { return l.refused.Load() }

// Open is how many accepted connections are not closed yet.
func (l *Listener) Open() int { return len(l.slots) }

// conn frees its slot when first closed.
type conn struct {
	net.Conn
	l    *Listener
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		<-c.l.slots
		if c.l.opts.OnRelease != nil {
			c.l.opts.OnRelease()
		}
	})
	return err
}
