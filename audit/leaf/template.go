package leaf

import (
	"bytes"
	"fmt"
	"strconv"
)

// sequenceMember is how the sequence member starts in canonical bytes. A
// quote inside a JSON string is always escaped, so outside the member name
// these bytes cannot occur: a template splits around exactly one of them.
var sequenceMember = []byte(`"sequence":`)

// Template is a leaf's canonical bytes with the sequence left open, so that
// the expensive part (validation, JSON, RFC 8785) runs before a sequence is
// assigned and the log's single committer only splices in the number.
type Template struct {
	prefix, suffix []byte
	leaf           Leaf
}

// NewTemplate validates l (its Sequence is ignored) and prepares it.
func NewTemplate(l Leaf) (Template, error) {
	l.Sequence = 1
	canon, err := Canonical(l)
	if err != nil {
		return Template{}, err
	}
	if n := bytes.Count(canon, sequenceMember); n != 1 {
		return Template{}, fmt.Errorf("leaf: template: %d sequence members, want 1", n)
	}
	i := bytes.Index(canon, sequenceMember) + len(sequenceMember)
	if canon[i] != '1' {
		return Template{}, fmt.Errorf("leaf: template: unexpected sequence encoding")
	}
	return Template{prefix: canon[:i], suffix: canon[i+1:], leaf: l}, nil
}

// Bytes returns the canonical bytes of the leaf with sequence seq; the
// result equals Canonical of the leaf with Sequence set to seq. seq must be
// in [1, 2^53-1].
func (t Template) Bytes(seq uint64) []byte {
	out := make([]byte, 0, len(t.prefix)+20+len(t.suffix))
	out = append(out, t.prefix...)
	out = strconv.AppendUint(out, seq, 10)
	return append(out, t.suffix...)
}

// Leaf returns the leaf with sequence seq.
func (t Template) Leaf(seq uint64) Leaf {
	l := t.leaf
	l.Sequence = seq
	return l
}

// Size returns the length of the template's bytes without the sequence.
func (t Template) Size() int { return len(t.prefix) + len(t.suffix) }
