package etcdtest

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to the shared server and can cut them all
// and refuse new ones: etcd going away and coming back, for one client,
// without stopping the server the rest of the package uses.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
}

// NewProxy starts a proxy to the shared server, stopped when the test ends.
func NewProxy(tb testing.TB) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{ln: ln, target: strings.TrimPrefix(Endpoints(tb)[0], "http://"), conns: map[net.Conn]struct{}{}}
	go p.serve()
	tb.Cleanup(func() {
		_ = ln.Close()
		p.SetDown(true)
	})
	return p
}

// Endpoints are the client URLs that go through the proxy.
func (p *Proxy) Endpoints() []string { return []string{"http://" + p.ln.Addr().String()} }

// SetDown cuts every connection and refuses new ones (true), or lets
// connections through again (false).
func (p *Proxy) SetDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			_ = c.Close()
		}
		clear(p.conns)
	}
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *Proxy) forward(c net.Conn) {
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		_ = c.Close()
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		p.mu.Unlock()
		_ = c.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
	_, _ = io.Copy(c, up)
	_ = c.Close()
}
