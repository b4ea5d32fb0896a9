package edge

import (
	"errors"
	"net/http"
	"time"
)

// DefaultWriteStallTimeout bounds, when Config leaves it 0, how long a
// client may leave a part of its response untaken (see
// Config.WriteStallTimeout).
const DefaultWriteStallTimeout = 30 * time.Second

// stallChunk is the most of a plain body written under one deadline: a
// client must take at least this much every WriteStallTimeout, so a large
// body over a slow but live link is not cut, while one that stops reading
// is.
const stallChunk = 64 << 10

// stallWriter writes a response so that a client that stops reading
// cannot hold its request for ever: every write, and every flush, must be
// taken by the client within the stall bound, which is set afresh before
// each. Past it the write fails, net/http cancels the request's context
// as for a client that went away, and the request ends that way (its audit
// event recorded, its slot freed). Only the waits on the client count: a
// reply that is slow to be produced is never cut, since no write is under
// way while the engine works.
type stallWriter struct {
	w     http.ResponseWriter
	rctl  *http.ResponseController
	stall time.Duration
	// off: the ResponseWriter has no deadlines (a test recorder), so
	// they are not asked for again on every write.
	off bool
}

func newStallWriter(w http.ResponseWriter, stall time.Duration) stallWriter {
	return stallWriter{w: w, rctl: http.NewResponseController(w), stall: stall}
}

// arm gives the next write to the connection the stall bound.
func (o *stallWriter) arm() {
	if o.off {
		return
	}
	if err := o.rctl.SetWriteDeadline(time.Now().Add(o.stall)); errors.Is(err, http.ErrNotSupported) {
		o.off = true
	}
}

// write sends p, at most stallChunk bytes under each deadline.
func (o *stallWriter) write(p []byte) error {
	for len(p) > 0 {
		n := min(len(p), stallChunk)
		o.arm()
		if _, err := o.w.Write(p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// writeFlush sends p (as write does) and flushes it at once, under the
// deadline of p's last part: one deadline per stream event, not one for
// the write and another for the flush.
func (o *stallWriter) writeFlush(p []byte) error {
	if err := o.write(p); err != nil {
		return err
	}
	err := o.rctl.Flush()
	if errors.Is(err, http.ErrNotSupported) {
		return nil
	}
	return err
}
