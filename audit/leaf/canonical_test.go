package leaf

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/gowebpki/jcs"
)

// referenceCanonical is the general route the hand-written encoder must
// equal: encoding/json, then an RFC 8785 transform by gowebpki/jcs.
func referenceCanonical(t testing.TB, l Leaf) []byte {
	t.Helper()
	raw, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// awkward are strings that exercise every escaping rule: quotes,
// backslashes, each control character class, DEL, HTML-sensitive bytes
// (not escaped by RFC 8785), U+2028/2029, astral runes and invalid UTF-8.
var awkward = []string{
	"", "plain", `q"uote`, `back\slash`, "\b\t\n\f\r", "\x00\x01\x1f", "\x7f",
	"<tag>&amp;", "/slash/", "\u2028\u2029", "é漢😀", "bad\xffutf8", "\xc3", "\xed\xa0\x80",
	"mixed \"\\\u0007 ok",
}

// TestCanonicalMatchesReference runs the encoder and the reference over
// leaves whose free-text members (endpoint, model, time) hold awkward
// strings, and over random integers; Canonical skips validation by design
// only in appendCanonical, so this calls that directly.
func TestCanonicalMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		l := example()
		l.Endpoint = awkward[r.IntN(len(awkward))] + awkward[r.IntN(len(awkward))]
		l.Model = awkward[r.IntN(len(awkward))]
		l.Time = awkward[r.IntN(len(awkward))]
		l.Sequence = r.Uint64N(maxJSONInt) + 1
		l.Status = 100 + r.IntN(500)
		l.PromptTokens, l.CompletionTokens = r.Int64N(maxJSONInt), r.Int64N(1000)
		if r.IntN(2) == 0 {
			l.PolicyDecisionID = ""
		}
		got, want := appendCanonical(nil, &l), referenceCanonical(t, l)
		if !bytes.Equal(got, want) {
			t.Fatalf("leaf %+v:\n got %s\nwant %s", l, got, want)
		}
	}
}

// FuzzCanonical: go test -fuzz FuzzCanonical ./audit/leaf/
func FuzzCanonical(f *testing.F) {
	for _, s := range awkward {
		f.Add(s, s, uint64(1), int64(0))
	}
	f.Fuzz(func(t *testing.T, endpoint, model string, seq uint64, tokens int64) {
		l := example()
		l.Endpoint, l.Model = endpoint, model
		l.Sequence = seq%maxJSONInt + 1
		if tokens < 0 {
			tokens = -tokens
		}
		l.PromptTokens = tokens % maxJSONInt
		got, want := appendCanonical(nil, &l), referenceCanonical(t, l)
		if !bytes.Equal(got, want) {
			t.Fatalf("got %s\nwant %s", got, want)
		}
	})
}
