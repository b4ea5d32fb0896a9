package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"
)

// appendRaw appends a raw member as encoding/json writes a Marshaler's
// output (jsontext.Value is one): nil as null; otherwise checked against
// the grammar of encoding/json's scanner, compacted (the whitespace
// between tokens dropped) and HTML-escaped (<, >, & and U+2028/2029 in
// strings), in one pass. Marshal fails on a value that is not JSON, empty
// included, and so does this. encoding/json's own check
// (json.Valid) costs several times this pass, per byte of every tool's
// schema; raw_json_test.go and the fuzz target hold the two equal.
func appendRaw(b []byte, v jsontext.Value) ([]byte, error) {
	if v == nil {
		return append(b, "null"...), nil
	}
	out, ok := appendCompact(b, v)
	if !ok {
		// The error path alone pays for encoding/json's message.
		var discard bytes.Buffer
		if err := json.Compact(&discard, v); err != nil {
			return b, fmt.Errorf("not JSON: %w", err)
		}
		return b, errors.New("not JSON")
	}
	return out, nil
}

// maxNestingDepth is encoding/json's bound on nested arrays and objects:
// a value deeper than it is an error there.
const maxNestingDepth = 10000

// What appendCompact expects next.
const (
	wantValue      = iota // a value: at the top, after ':', after ',' in an array
	wantValueOrEnd        // after '['
	wantKey               // after ',' in an object
	wantKeyOrEnd          // after '{'
	wantColon             // after a key
	wantCommaOrEnd        // after a value in an array or object
	wantNothing           // after the top-level value
)

// appendCompact appends src compacted and HTML-escaped as encoding/json's
// compaction of a Marshaler's output writes it, and reports whether src is
// one JSON value as encoding/json's scanner reads it: RFC 8259's grammar,
// strings of any bytes but control characters (UTF-8 not checked), at
// most maxNestingDepth levels. On false, what it appended is garbage.
func appendCompact(dst, src []byte) ([]byte, bool) {
	var stackBuf [32]byte
	stack := stackBuf[:0] // '{' or '[' per open level
	state := wantValue
	n := len(src)
	i, start := 0, 0 // src[start:i] is not yet appended
	for {
		if i < n && isSpace(src[i]) {
			dst = append(dst, src[start:i]...)
			for i < n && isSpace(src[i]) {
				i++
			}
			start = i
		}
		if state == wantNothing {
			break
		}
		if i == n {
			return dst, false
		}
		c := src[i]
		switch state {
		case wantKeyOrEnd, wantKey:
			if c == '}' && state == wantKeyOrEnd {
				stack = stack[:len(stack)-1]
				i++
				state = afterValue(stack)
				continue
			}
			if c != '"' {
				return dst, false
			}
			var ok bool
			if dst, i, start, ok = appendCompactString(dst, src, i, start); !ok {
				return dst, false
			}
			state = wantColon
		case wantColon:
			if c != ':' {
				return dst, false
			}
			i++
			state = wantValue
		case wantCommaOrEnd:
			top := stack[len(stack)-1]
			switch {
			case c == ',' && top == '{':
				state = wantKey
			case c == ',':
				state = wantValue
			case c == '}' && top == '{', c == ']' && top == '[':
				stack = stack[:len(stack)-1]
				state = afterValue(stack)
			default:
				return dst, false
			}
			i++
		default: // wantValue, wantValueOrEnd
			switch {
			case c == ']' && state == wantValueOrEnd:
				stack = stack[:len(stack)-1]
				i++
				state = afterValue(stack)
			case c == '{' || c == '[':
				if stack = append(stack, c); len(stack) > maxNestingDepth {
					return dst, false
				}
				i++
				state = wantKeyOrEnd
				if c == '[' {
					state = wantValueOrEnd
				}
			case c == '"':
				var ok bool
				if dst, i, start, ok = appendCompactString(dst, src, i, start); !ok {
					return dst, false
				}
				state = afterValue(stack)
			case c == 't' || c == 'f' || c == 'n':
				lit := "null"
				switch c {
				case 't':
					lit = "true"
				case 'f':
					lit = "false"
				}
				if string(src[i:min(i+len(lit), n)]) != lit {
					return dst, false
				}
				i += len(lit)
				state = afterValue(stack)
			case c == '-' || c >= '0' && c <= '9':
				if i = scanNumber(src, i); i < 0 {
					return dst, false
				}
				state = afterValue(stack)
			default:
				return dst, false
			}
		}
	}
	if i != n {
		return dst, false
	}
	return append(dst, src[start:]...), true
}

func afterValue(stack []byte) int {
	if len(stack) == 0 {
		return wantNothing
	}
	return wantCommaOrEnd
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// appendCompactString reads the string that starts at src[i], a quote,
// escaping <, >, & and U+2028/2029 into dst as it goes; it returns the
// index past the closing quote.
func appendCompactString(dst, src []byte, i, start int) ([]byte, int, int, bool) {
	n := len(src)
	for i++; i < n; i++ {
		for i < n && plainInString[src[i]] {
			i++
		}
		if i == n {
			break
		}
		switch c := src[i]; {
		case c == '"':
			return dst, i + 1, start, true
		case c == '\\':
			if i+1 == n {
				return dst, i, start, false
			}
			switch src[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+5 >= n || !isHex(src[i+2]) || !isHex(src[i+3]) || !isHex(src[i+4]) || !isHex(src[i+5]) {
					return dst, i, start, false
				}
				i += 5
			default:
				return dst, i, start, false
			}
		case c < 0x20:
			return dst, i, start, false
		case c == '<' || c == '>' || c == '&':
			dst = append(dst, src[start:i]...)
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			start = i + 1
		case c == 0xE2 && i+2 < n && src[i+1] == 0x80 && src[i+2]&^1 == 0xA8:
			dst = append(dst, src[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[src[i+2]&0xF])
			i += 2
			start = i + 1
		}
	}
	return dst, i, start, false
}

// plainInString is the bytes a string holds as they are: not its end, an
// escape, a control character, nor the start of what HTML-escaping
// rewrites.
var plainInString = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' && c != 0xE2
	}
	return t
}()

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// scanNumber returns the index past the number that starts at src[i], or
// -1: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(src []byte, i int) int {
	n := len(src)
	if src[i] == '-' {
		if i++; i == n {
			return -1
		}
	}
	switch {
	case src[i] == '0':
		i++
	case src[i] >= '1' && src[i] <= '9':
		i = skipDigits(src, i+1)
	default:
		return -1
	}
	if i < n && src[i] == '.' {
		j := skipDigits(src, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < n && (src[i] == 'e' || src[i] == 'E') {
		i++
		if i < n && (src[i] == '+' || src[i] == '-') {
			i++
		}
		j := skipDigits(src, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func skipDigits(src []byte, i int) int {
	for i < len(src) && src[i] >= '0' && src[i] <= '9' {
		i++
	}
	return i
}
