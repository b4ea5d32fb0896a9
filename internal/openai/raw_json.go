package openai

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"
)

// appendRaw appends a raw member as encoding/json writes a Marshaler's
// output (jsontext.Value is one): nil as null; otherwise checked and
// compacted by encoding/json's own scanner (json.Compact), then
// HTML-escaped as Marshal does (<, > and & as \u00XX, U+2028 and U+2029 as
// \u202X). Compaction leaves those bytes only inside strings, so escaping
// after it writes what Marshal's compaction with escaping writes. Marshal
// fails on a value that is not JSON, empty included, and so does this;
// raw_json_test.go and the fuzz target hold the two equal.
func appendRaw(b []byte, v jsontext.Value) ([]byte, error) {
	if v == nil {
		return append(b, "null"...), nil
	}
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, v); err != nil {
		return b, fmt.Errorf("not JSON: %w", err)
	}
	out := buf.Bytes()
	if i := htmlUnsafeAt(out[len(b):]); i >= 0 {
		return appendHTMLEscaped(out[:len(b)+i], out[len(b)+i:]), nil
	}
	return out, nil
}

// htmlUnsafeAt returns the index of the first byte of src that Marshal
// escapes in a Marshaler's output, or -1.
func htmlUnsafeAt(src []byte) int {
	for i, c := range src {
		if c == '<' || c == '>' || c == '&' || isLineSeparatorAt(src, i) {
			return i
		}
	}
	return -1
}

// isLineSeparatorAt reports whether U+2028 or U+2029 (E2 80 A8/A9) starts
// at src[i].
func isLineSeparatorAt(src []byte, i int) bool {
	return src[i] == 0xE2 && i+2 < len(src) && src[i+1] == 0x80 && src[i+2]&^1 == 0xA8
}

// appendHTMLEscaped appends src with the bytes htmlUnsafeAt finds escaped.
// src may share dst's array at dst's end: it is copied first.
func appendHTMLEscaped(dst, src []byte) []byte {
	src = bytes.Clone(src)
	start := 0
	for i := 0; i < len(src); i++ {
		switch c := src[i]; {
		case c == '<' || c == '>' || c == '&':
			dst = append(dst, src[start:i]...)
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			start = i + 1
		case isLineSeparatorAt(src, i):
			dst = append(dst, src[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[src[i+2]&0xF])
			i += 2
			start = i + 1
		}
	}
	return append(dst, src[start:]...)
}
