package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"unicode/utf8"
)

// reader reads one JSON document strictly: members named exactly, each
// once, all present, with the expected types; integers in canonical form.
type reader struct{ dec *json.Decoder }

// maxInt is the largest integer a document may hold (I-JSON, 2^53-1).
const maxInt = 1<<53 - 1

var canonicalInt = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)

func newReader(data []byte) (*reader, error) {
	if !utf8.Valid(data) {
		return nil, fail(Malformed, "the document is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return &reader{dec: dec}, nil
}

func (r *reader) token() (json.Token, error) {
	t, err := r.dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, wrap(Malformed, fmt.Errorf("JSON: %w", err))
	}
	return t, nil
}

func (r *reader) delim(want json.Delim) error {
	t, err := r.token()
	if err != nil {
		return err
	}
	if d, ok := t.(json.Delim); !ok || d != want {
		return fail(Malformed, "expected %q, found %v", want, t)
	}
	return nil
}

// object reads an object whose members are exactly those of fields, each
// read by its function, except that those named in optional may be
// absent. what names the object in errors.
func (r *reader) object(what string, fields map[string]func(*reader) error, optional ...string) error {
	if err := r.delim('{'); err != nil {
		return wrap(Malformed, fmt.Errorf("%s: %w", what, errors.Unwrap(err)))
	}
	seen := map[string]bool{}
	for r.dec.More() {
		t, err := r.token()
		if err != nil {
			return err
		}
		name, _ := t.(string)
		read, known := fields[name]
		switch {
		case !known:
			return fail(Malformed, "%s: unknown member %q", what, name)
		case seen[name]:
			return fail(Malformed, "%s: member %q appears twice", what, name)
		}
		seen[name] = true
		if err := read(r); err != nil {
			var e *Error
			if errors.As(err, &e) && e.Kind == Malformed {
				return fail(Malformed, "%s.%s: %v", what, name, e.Err)
			}
			return err
		}
	}
	if err := r.delim('}'); err != nil {
		return err
	}
	for name := range fields {
		if !seen[name] && !slices.Contains(optional, name) {
			return fail(Malformed, "%s: member %q is missing", what, name)
		}
	}
	return nil
}

func (r *reader) str(dst *string) error {
	t, err := r.token()
	if err != nil {
		return err
	}
	s, ok := t.(string)
	if !ok {
		return fail(Malformed, "expected a string, found %v", t)
	}
	*dst = s
	return nil
}

func (r *reader) boolean(dst *bool) error {
	t, err := r.token()
	if err != nil {
		return err
	}
	b, ok := t.(bool)
	if !ok {
		return fail(Malformed, "expected true or false, found %v", t)
	}
	*dst = b
	return nil
}

func (r *reader) uint(dst *uint64) error {
	t, err := r.token()
	if err != nil {
		return err
	}
	n, ok := t.(json.Number)
	if !ok || !canonicalInt.MatchString(string(n)) {
		return fail(Malformed, "expected a non-negative integer without sign, fraction or exponent, found %v", t)
	}
	v, err := strconv.ParseUint(string(n), 10, 64)
	if err != nil || v > maxInt {
		return fail(Malformed, "integer %s is above 2^53-1", n)
	}
	*dst = v
	return nil
}

func (r *reader) strs(dst *[]string) error {
	if err := r.delim('['); err != nil {
		return err
	}
	out := []string{}
	for r.dec.More() {
		var s string
		if err := r.str(&s); err != nil {
			return err
		}
		out = append(out, s)
	}
	*dst = out
	return r.delim(']')
}

// end checks that nothing but white space follows the document.
func (r *reader) end() error {
	if _, err := r.dec.Token(); !errors.Is(err, io.EOF) {
		return fail(Malformed, "data after the document")
	}
	return nil
}

// firstMember returns the name of the first member of the top-level object
// ("" when there is none or the document is not an object).
func firstMember(data []byte) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	t, _ := dec.Token()
	s, _ := t.(string)
	return s
}

// newStreamReader reads one document from an io.Reader, checking that it
// is UTF-8 as it goes, so that a document of any size is read in bounded
// memory (a bundle).
func newStreamReader(in io.Reader) *reader {
	dec := json.NewDecoder(&utf8Reader{in: in})
	dec.UseNumber()
	return &reader{dec: dec}
}

// utf8Reader passes bytes through, failing at the first byte that is not
// UTF-8; it holds back a rune cut by a read until its end arrives.
type utf8Reader struct {
	in      io.Reader
	pending []byte
}

func (u *utf8Reader) Read(p []byte) (int, error) {
	if len(p) < 8 {
		return 0, io.ErrShortBuffer
	}
	n := copy(p, u.pending)
	u.pending = u.pending[:0]
	m, err := u.in.Read(p[n:])
	n += m
	// Hold back an incomplete rune at the end unless the input ended.
	end := n
	if err == nil {
		for back := 1; back <= 3 && back <= end; back++ {
			c := p[end-back]
			if c < 0x80 {
				break
			}
			if c >= 0xC0 { // a rune's first byte
				if !utf8.FullRune(p[end-back : end]) {
					u.pending = append(u.pending, p[end-back:end]...)
					end -= back
				}
				break
			}
		}
	}
	if !utf8.Valid(p[:end]) {
		return 0, fail(Malformed, "the document is not valid UTF-8")
	}
	if errors.Is(err, io.EOF) && len(u.pending) > 0 {
		return 0, fail(Malformed, "the document is not valid UTF-8")
	}
	return end, err
}

// member reads the next member's name of an open object, which must be
// name: a document read in one pass fixes the order of its members.
func (r *reader) member(what, name string) error {
	t, err := r.token()
	if err != nil {
		return err
	}
	if got, _ := t.(string); got != name {
		return fail(Malformed, "%s: expected member %q, found %v", what, name, t)
	}
	return nil
}
