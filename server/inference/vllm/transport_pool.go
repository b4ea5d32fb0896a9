package vllm

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"
)

// connPool is the connections to one server: at most maxOpen open, of
// which at most maxIdle idle (a stack: the most recently used first, so
// that light traffic keeps few connections warm). A request that finds
// maxOpen busy queues, and the next connection returned or slot freed is
// handed to the first in the queue, without a goroutine of the pool's.
type connPool struct {
	addr    string
	tls     *tls.Config // nil: plain TCP
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	maxOpen int
	maxIdle int
	idleFor time.Duration

	mu      sync.Mutex
	open    int           // connections open or being dialled
	idle    []*pconn      // oldest first
	waiting []chan *pconn // nil received: a slot to dial in
}

// get returns a connection for one request: an idle one that is still
// alive, or, with fresh or none idle, a new one. At maxOpen it waits
// until a connection or slot is handed over or ctx ends.
func (p *connPool) get(ctx context.Context, fresh bool) (*pconn, error) {
	for {
		p.mu.Lock()
		if pc := p.popIdle(); pc != nil {
			p.mu.Unlock()
			switch {
			case fresh:
				// The slot of an idle connection is the new one's.
				pc.close()
				return p.dialIn(ctx)
			case time.Since(pc.idleSince) > p.idleFor || !pc.alive():
				p.discard(pc)
				continue
			}
			pc.reused = true
			return pc, nil
		}
		if p.open < p.maxOpen {
			p.open++
			p.mu.Unlock()
			return p.dialIn(ctx)
		}
		w := make(chan *pconn, 1)
		p.waiting = append(p.waiting, w)
		p.mu.Unlock()
		select {
		case pc := <-w:
			if pc == nil {
				return p.dialIn(ctx)
			}
			pc.reused = true
			return pc, nil
		case <-ctx.Done():
			p.mu.Lock()
			i := slices.Index(p.waiting, w)
			if i >= 0 {
				p.waiting = slices.Delete(p.waiting, i, i+1)
			}
			p.mu.Unlock()
			if i < 0 { // handed over meanwhile: pass it on
				if pc := <-w; pc != nil {
					p.put(pc)
				} else {
					p.release()
				}
			}
			return nil, ctx.Err()
		}
	}
}

// popIdle takes the most recently used idle connection, or nil (p.mu
// held).
func (p *connPool) popIdle() *pconn {
	n := len(p.idle)
	if n == 0 {
		return nil
	}
	pc := p.idle[n-1]
	p.idle[n-1] = nil
	p.idle = p.idle[:n-1]
	return pc
}

// dialIn opens a connection in a slot the caller holds; on failure the
// slot is released.
func (p *connPool) dialIn(ctx context.Context) (*pconn, error) {
	pc, err := p.connect(ctx)
	if err != nil {
		p.release()
		return nil, err
	}
	return pc, nil
}

func (p *connPool) connect(ctx context.Context) (*pconn, error) {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	raw, err := p.dial(dctx, "tcp", p.addr)
	if err != nil {
		return nil, fmt.Errorf("vllm transport: dial %s: %w", p.addr, err)
	}
	conn := raw
	if p.tls != nil {
		tc := tls.Client(raw, p.tls)
		if err := tc.HandshakeContext(dctx); err != nil {
			_ = raw.Close()
			return nil, fmt.Errorf("vllm transport: TLS handshake with %s: %w", p.addr, err)
		}
		conn = tc
	}
	pc := &pconn{pool: p, conn: conn, raw: raw}
	pc.br = bufio.NewReaderSize(pc, connBufferSize)
	pc.bw = bufio.NewWriterSize(countingWriter{pc}, connBufferSize)
	return pc, nil
}

// connBufferSize is each connection's read and write buffer: a request
// and a response header fit; a stream's events are framed by their own
// reader's buffer.
const connBufferSize = 4 << 10

// put returns a connection whose response was read to its end: to the
// first request waiting, else to the idle stack, else it is closed.
func (p *connPool) put(pc *pconn) {
	pc.reused = false
	p.mu.Lock()
	if len(p.waiting) > 0 {
		w := p.waiting[0]
		p.waiting = slices.Delete(p.waiting, 0, 1)
		p.mu.Unlock()
		w <- pc
		return
	}
	if len(p.idle) >= p.maxIdle {
		p.open--
		p.mu.Unlock()
		pc.close()
		return
	}
	pc.idleSince = time.Now()
	p.idle = append(p.idle, pc)
	// The oldest idle connection, past its time, is closed here, so that
	// connections left at the stack's bottom after a burst do not stay
	// open (in CLOSE_WAIT once the server closed them) for good.
	var expired *pconn
	if old := p.idle[0]; pc.idleSince.Sub(old.idleSince) > p.idleFor {
		expired = old
		p.idle = slices.Delete(p.idle, 0, 1)
		p.open--
	}
	p.mu.Unlock()
	if expired != nil {
		expired.close()
	}
}

// discard closes a connection that cannot serve another request and
// frees its slot.
func (p *connPool) discard(pc *pconn) {
	pc.close()
	p.release()
}

// release frees a slot: it goes to the first request waiting, which
// dials in it.
func (p *connPool) release() {
	p.mu.Lock()
	if len(p.waiting) > 0 {
		w := p.waiting[0]
		p.waiting = slices.Delete(p.waiting, 0, 1)
		p.mu.Unlock()
		w <- nil
		return
	}
	p.open--
	p.mu.Unlock()
}

// closeIdle closes every idle connection.
func (p *connPool) closeIdle() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.open -= len(idle)
	p.mu.Unlock()
	for _, pc := range idle {
		pc.close()
	}
}

// stats is the pool's open and idle connections, for tests.
func (p *connPool) stats() (open, idle int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open, len(p.idle)
}
