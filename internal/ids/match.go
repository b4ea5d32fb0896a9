package ids

import "regexp"

// format is one id format matched by hand: prefix, then one byte of
// first, then between minRest and maxRest bytes of rest. Every format of
// this package has that shape, and its regular expression (re, the
// documented form and the text of the error) is matched by the same
// strings: a test holds the two equal. The regexp engine cost about
// 10 µs of CPU per proxied request, four or five ids checked for each
// audit event; this costs well under one.
type format struct {
	prefix           string
	first, rest      charset
	minRest, maxRest int
	re               *regexp.Regexp
}

// charset is a set of ASCII bytes.
type charset [2]uint64

func (c charset) has(b byte) bool { return b < 128 && c[b>>6]&(1<<(b&63)) != 0 }

// chars returns the set of the bytes of each string, where "a-z" is a
// range.
func chars(spans ...string) charset {
	var c charset
	for _, s := range spans {
		lo, hi := s[0], s[len(s)-1]
		for b := lo; ; b++ {
			c[b>>6] |= 1 << (b & 63)
			if b == hi {
				break
			}
		}
	}
	return c
}

func (f *format) match(s string) bool {
	if len(s) < len(f.prefix) || s[:len(f.prefix)] != f.prefix {
		return false
	}
	s = s[len(f.prefix):]
	if f.first != (charset{}) {
		if s == "" || !f.first.has(s[0]) {
			return false
		}
		s = s[1:]
	}
	if len(s) < f.minRest || len(s) > f.maxRest {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !f.rest.has(s[i]) {
			return false
		}
	}
	return true
}

var (
	lowerDigit = chars("a-z", "0-9")
	alnum      = chars("a-z", "A-Z", "0-9")

	tenantFormat    = &format{first: lowerDigit, rest: chars("a-z", "0-9", "_", "-"), maxRest: 62, re: tenantRE}
	keyFormat       = &format{prefix: KeyPrefix, rest: alnum, minRest: 1, maxRest: 64, re: keyRE}
	applianceFormat = &format{prefix: AppliancePrefix, rest: chars("a-z", "A-Z", "0-9", "_", "-"), minRest: 1, maxRest: 64, re: applianceRE}
	requestFormat   = &format{prefix: RequestPrefix, rest: alnum, minRest: 1, maxRest: 64, re: requestRE}
	decisionFormat  = &format{prefix: DecisionPrefix, rest: alnum, minRest: 1, maxRest: 64, re: decisionRE}
	namespaceFormat = &format{first: alnum, rest: chars("a-z", "A-Z", "0-9", ".", "_", "-"), maxRest: 63, re: modelNamespaceRE}
	nameFormat      = &format{first: alnum, rest: chars("a-z", "A-Z", "0-9", ".", "_", ":", "/", "-"), maxRest: 191, re: modelNameRE}
)

// matchModel matches ModelPattern: a namespace has no '/', so the first
// one ends it.
func matchModel(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return namespaceFormat.match(s[:i]) && nameFormat.match(s[i+1:])
		}
	}
	return false
}
