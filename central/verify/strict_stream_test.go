package verify

import (
	"io"
	"testing"
	"testing/iotest"
)

// The streaming reader checks UTF-8 across reads of any size: a rune cut
// by a read passes, bytes that are not UTF-8 fail as malformed wherever
// the reads cut them.
func TestUTF8ReaderAcrossReads(t *testing.T) {
	for _, c := range []struct {
		name string
		doc  string
		ok   bool
	}{
		{"ascii", `{"a":"b"}`, true},
		{"two, three and four bytes", `{"a":"é€😀"}`, true},
		{"a stray continuation byte", "{\"a\":\"\x80\"}", false},
		{"a cut rune at the end", "{\"a\":\"b\"}\xe2\x82", false},
		{"an overlong encoding", "{\"a\":\"\xc0\xaf\"}", false},
	} {
		for _, step := range []int{1, 2, 3, 5, 64} {
			var in io.Reader = &chunked{data: []byte(c.doc), step: step}
			r := newStreamReader(iotest.HalfReader(in))
			var got string
			err := r.object("doc", map[string]func(*reader) error{"a": func(r *reader) error { return r.str(&got) }})
			if err == nil {
				err = r.end()
			}
			if (err == nil) != c.ok || (err != nil && KindOf(err) != Malformed) {
				t.Errorf("%s, reads of %d: %v (kind %v), want ok %v", c.name, step, err, KindOf(err), c.ok)
			}
		}
	}
}

// chunked returns its data step bytes at a time.
type chunked struct {
	data []byte
	step int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.step)], c.data)
	c.data = c.data[n:]
	return n, nil
}
