package builtin

import (
	"unicode"
	"unicode/utf8"
)

// CountTokens counts the tokens of s as the built-in engine does: a token is
// a maximal run of non-whitespace characters. It does not allocate.
func CountTokens(s string) int64 {
	var n int64
	in := false
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		i += size
		if unicode.IsSpace(r) {
			in = false
		} else if !in {
			in = true
			n++
		}
	}
	return n
}

// pieces cuts s after each run of whitespace: every piece is one word and the
// whitespace after it (leading whitespace belongs to the first piece), so the
// pieces concatenate to s exactly.
func pieces(s string) []string {
	var out []string
	start := 0
	seenWord, inSpace := false, false
	for i, r := range s {
		space := unicode.IsSpace(r)
		switch {
		case space && seenWord:
			inSpace = true
		case !space && inSpace:
			out = append(out, s[start:i])
			start, inSpace = i, false
		case !space:
			seenWord = true
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
