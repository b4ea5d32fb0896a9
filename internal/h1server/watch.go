package h1server

import (
	"sync"
	"time"
)

// watchDelay is how long a request runs before its connection is watched
// for the client going away. Most requests end sooner, and for them no
// goroutine is started (net/http starts one for every request); a client
// that leaves a request shorter than this is noticed when its response is
// written.
const watchDelay = 10 * time.Millisecond

// aLongTimeAgo is a read deadline in the past: it wakes a pending read.
var aLongTimeAgo = time.Unix(1, 0)

// Watch states.
const (
	watchOff = iota
	watchArmed
	watchRunning
)

// watch notices a client that goes away while its request runs: armed once
// the request's body has been read to its end (so that it never takes a
// byte of the body), after watchDelay it reads the connection, below the
// bufio.Reader. A byte read belongs to the next pipelined request and is
// kept for it; an error or EOF cancels the request's context
// (ErrClientGone). Before the next request is read, a running watch is
// stopped by a read deadline in the past.
type watch struct {
	mu       sync.Mutex
	state    int
	stopping bool
	timer    *time.Timer
	done     chan struct{} // closed when a running watch ends
	buf      [1]byte
}

// arm starts the watch's delay; the timer is the connection's, made once.
func (w *watch) arm(c *conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != watchOff {
		return
	}
	w.state = watchArmed
	d := watchDelay
	if c.srv.watchDelay > 0 {
		d = c.srv.watchDelay
	}
	if w.timer == nil {
		w.timer = time.AfterFunc(d, func() { w.run(c) })
	} else {
		w.timer.Reset(d)
	}
}

// run is the watch itself, on the timer's goroutine.
func (w *watch) run(c *conn) {
	w.mu.Lock()
	if w.state != watchArmed {
		w.mu.Unlock()
		return
	}
	w.state = watchRunning
	done := make(chan struct{})
	w.done = done
	w.mu.Unlock()
	c.srv.watches.Add(1)

	n, err := c.rwc.Read(w.buf[:])

	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case n == 1:
		c.r.b, c.r.hasByte = w.buf[0], true
	case err != nil && !w.stopping:
		c.r.err = err
		c.cancelReq(ErrClientGone)
	}
	w.state = watchOff
	close(done)
}

// stop ends the watch: an armed one before it runs, a running one by a
// read deadline in the past, awaited.
func (w *watch) stop(c *conn) {
	w.mu.Lock()
	switch w.state {
	case watchArmed:
		w.timer.Stop()
		w.state = watchOff
		w.mu.Unlock()
	case watchRunning:
		w.stopping = true
		done := w.done
		w.mu.Unlock()
		_ = c.rwc.SetReadDeadline(aLongTimeAgo)
		<-done
		_ = c.rwc.SetReadDeadline(time.Time{})
		w.mu.Lock()
		w.stopping = false
		w.mu.Unlock()
	default:
		w.mu.Unlock()
	}
}

// release stops the timer for good, when the connection ends.
func (w *watch) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
	w.state = watchOff
}
