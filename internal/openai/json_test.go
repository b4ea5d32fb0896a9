package openai

import (
	"encoding/json"
	"testing"
)

// strings that exercise every escape of encoding/json.
var jsonStrings = []string{
	"", "hello ", `quote " and \ backslash`, "<b>&amp;</b>", "tab\tnew\nline\rcr\bbs\ffeed",
	"\x00\x01\x1f\x7f", "é ü 日本語 🙂", "line\u2028sep\u2029para", "bad \xff utf8 \xe2\x82", `{"city":"Paris"}`,
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range jsonStrings {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("%q: got %s, want %s", s, got[1:], want)
		}
		if got := String(s); string(got) != string(want) {
			t.Errorf("String(%q) = %s, want %s", s, got, want)
		}
	}
}
