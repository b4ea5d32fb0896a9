// Package readsized reads a body whose sender announced its length
// (Content-Length) into a buffer of that size, where io.ReadAll starts at
// 512 bytes and grows as it goes: one allocation for a typical request or
// reply instead of several.
package readsized

import "io"

// StartMax bounds the buffer a body is first read into, whatever length
// was announced: an announcement costs nothing to make, and sized from it
// a request that announces the edge's largest body and sends nothing
// would hold that much memory for as long as the body may take, per
// connection. A larger body's buffer grows as its bytes arrive, doubling
// up to the announced size, so memory follows what was sent.
const StartMax = 64 << 10

// ReadAll reads r to its end, like io.ReadAll, with the buffer sized from
// announced, the length the sender announced (-1 or 0 when it did not).
// With limit ≥ 0 it reads at most one byte past limit, so that the caller
// sees a body over its limit by its length, as with
// io.ReadAll(io.LimitReader(r, limit+1)); a negative limit reads all. A
// read that fails returns what had arrived with its error.
func ReadAll(r io.Reader, announced, limit int64) ([]byte, error) {
	if announced <= 0 || limit >= 0 && announced > limit {
		if limit >= 0 {
			r = io.LimitReader(r, limit+1)
		}
		return io.ReadAll(r)
	}
	// One byte more than announced, so that EOF is seen without a grow.
	want := int(announced) + 1
	buf := make([]byte, 0, min(want, StartMax))
	for {
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if limit >= 0 && int64(len(buf)) > limit {
			return buf[:limit+1], nil // longer than announced and past the limit
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
		if len(buf) == cap(buf) {
			size := 2 * cap(buf) // doubling, up to the announced size while below it
			if len(buf) < want {
				size = min(size, want)
			}
			grown := make([]byte, len(buf), size)
			buf = grown[:copy(grown, buf)]
		}
	}
}
