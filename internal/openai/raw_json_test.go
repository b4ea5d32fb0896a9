package openai

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// rawCases are raw members at the edges of encoding/json's scanner: every
// token, escape and number form, whitespace everywhere it may be, and
// near misses of each.
var rawCases = []string{
	`0`, `-0`, `-`, `01`, `1.`, `1.5`, `.5`, `1e5`, `1E+5`, `1e-05`, `1e`, `1e+`, `-1.25e-3`, `2.`, `+1`, `0x10`,
	`true`, `false`, `null`, `tru`, `nulll`, `True`, `[true,false,null]`, `[truefalse]`,
	`""`, `"\"\\\/\b\f\n\r\t"`, `"\u00e9\uD83D\uDE42"`, `"\u00g0"`, `"\u12"`, `"\x"`, `"\`, `"abc`, "\"\x7f\"", "\"\x1f\"",
	"\"\xe2\x80\xa8\"", "\"\xe2\x80\xa9\xe2\x80\xaa\"", "\"\xe2\x80\"", "\"<>&\"", `"\u2028"`,
	`{}`, `[]`, `{"a":1,"b":[1,2,{"c":null}]}`, `{"a"}`, `{"a":}`, `{,}`, `[,]`, `[1,]`, `{"a":1,}`, `{1:2}`, `[1 2]`, `{"a":1 "b":2}`,
	`]`, `}`, `[}`, `{]`, `[[]`, `[]]`, `"a" "b"`, `1 2`,
	" \t\r\n{ \"a\" :\n[ 1 ,\t2 ] , \"b\" : { } }\n ", "   ", "\v1", "\u00a01",
}

func TestAppendRawMatchesEncodingJSON(t *testing.T) {
	deep := func(n int) string { return strings.Repeat(`[{"a":`, n/2) + strings.Repeat(`}]`, n/2) }
	cases := append(append([]string{}, rawCases...), rawValues...)
	cases = append(cases, notJSON...)
	// encoding/json's scanner refuses nesting deeper than 10,000.
	cases = append(cases, "", deep(10000), deep(10002), strings.Repeat("[", 10001)+strings.Repeat("]", 10001))
	for _, raw := range cases {
		sameRawAsEncodingJSON(t, []byte(raw))
	}
}

// sameRawAsEncodingJSON holds appendRaw to encoding/json's writing of a
// jsontext.Value: the same bytes, or both fail.
func sameRawAsEncodingJSON(t *testing.T, raw []byte) {
	want, wantErr := json.Marshal(jsontext.Value(raw))
	got, err := appendRaw([]byte("x"), raw)
	switch {
	case (err == nil) != (wantErr == nil):
		t.Errorf("%q: appendRaw: %v (wrote %q); encoding/json: %v", raw, err, got, wantErr)
	case err == nil && string(got) != "x"+string(want):
		t.Errorf("%q:\n got %s\nwant %s", raw, got[1:], want)
	}
}
