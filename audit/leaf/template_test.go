package leaf

import (
	"bytes"
	"testing"
)

func TestTemplateMatchesCanonical(t *testing.T) {
	tricky := example()
	tricky.Model = `x","sequence":9,"y":"`
	tricky.Endpoint = `"sequence":`
	for _, base := range []Leaf{example(), tricky} {
		tpl, err := NewTemplate(base)
		if err != nil {
			t.Fatal(err)
		}
		for _, seq := range []uint64{1, 2, 9, 10, 99, 100, 12345, 1<<53 - 1} {
			l := base
			l.Sequence = seq
			want, err := Canonical(l)
			if err != nil {
				t.Fatal(err)
			}
			if got := tpl.Bytes(seq); !bytes.Equal(got, want) {
				t.Fatalf("seq %d:\n got %s\nwant %s", seq, got, want)
			}
			if tpl.Leaf(seq) != l {
				t.Fatalf("Leaf(%d) = %+v", seq, tpl.Leaf(seq))
			}
		}
	}
}

func TestTemplateValidates(t *testing.T) {
	l := example()
	l.Status = 0
	if _, err := NewTemplate(l); err == nil {
		t.Fatal("NewTemplate accepted an invalid leaf")
	}
}
