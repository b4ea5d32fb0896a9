package vllmfake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
)

// obj is a JSON object whose keys keep their order, so a response can list
// its fields in the order vLLM's pydantic models serialise them and decide
// field by field between null and absent.
type obj []kv

type kv struct {
	k string
	v any
}

// MarshalJSON writes the fields in order, without HTML escaping (neither
// pydantic nor Starlette's JSONResponse escapes <, > or &).
func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := marshal(f.k)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		v, err := marshal(f.v)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshal is json.Marshal without HTML escaping and without the trailing
// newline of an Encoder: compact, as pydantic's model_dump_json and
// Starlette's JSONResponse (separators "," and ":") write.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func mustMarshal(v any) []byte {
	b, err := marshal(v)
	if err != nil {
		panic(err) // only values built here are marshalled
	}
	return b
}

// pyFloat is a JSON number spelled as Python's repr(float) spells it, which
// is what json.dumps writes for the floats of an embedding.
type pyFloat float64

// MarshalJSON writes the shortest round-tripping digits, in exponent form
// where Python's repr switches to it (decimal exponent < -4 or >= 16).
func (f pyFloat) MarshalJSON() ([]byte, error) {
	x := float64(f)
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil, fmt.Errorf("vllmfake: %v is not JSON", x)
	}
	e := strconv.FormatFloat(x, 'e', -1, 64) // d.ddde±XX
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return []byte(e), nil
	}
	s := strconv.FormatFloat(x, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return []byte(s), nil
}

// pyDumps writes a value as Python's json.dumps does with its defaults
// (separators ", " and ": ", ensure_ascii=True): vLLM writes its in-stream
// error frames that way, unlike every other body it sends.
func pyDumps(v any) string {
	var b strings.Builder
	pyDump(&b, v)
	return b.String()
}

func pyDump(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case obj:
		b.WriteByte('{')
		for i, f := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			pyString(b, f.k)
			b.WriteString(": ")
			pyDump(b, f.v)
		}
		b.WriteByte('}')
	case string:
		pyString(b, x)
	case *string:
		if x == nil {
			b.WriteString("null")
		} else {
			pyString(b, *x)
		}
	case int:
		b.WriteString(strconv.Itoa(x))
	case bool:
		b.WriteString(strconv.FormatBool(x))
	default:
		panic(fmt.Sprintf("vllmfake: pyDump of %T", v))
	}
}

// pyString quotes s as json.dumps(ensure_ascii=True) does: every non-ASCII
// rune as \uXXXX (a surrogate pair above the BMP).
func pyString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20 || (r >= 0x7f && r <= 0xffff):
			fmt.Fprintf(b, `\u%04x`, r)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(b, `\u%04x\u%04x`, r1, r2)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// pyArgs re-serialises a JSON value as Python's json.dumps(ensure_ascii=False)
// would after json.loads: keys in their order, ", " and ": " separators. vLLM's
// tool parsers (hermes and the like) hand tool-call arguments through exactly
// that round trip, so `{"a":1}` from the model reaches the client as
// `{"a": 1}`.
func pyArgs(raw []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var b strings.Builder
	if err := pyArgsValue(dec, &b); err != nil {
		return "", err
	}
	if dec.More() {
		return "", fmt.Errorf("vllmfake: trailing data after arguments")
	}
	return b.String(), nil
}

func pyArgsValue(dec *json.Decoder, b *strings.Builder) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	switch x := t.(type) {
	case json.Delim:
		switch x {
		case '{':
			b.WriteByte('{')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					b.WriteString(", ")
				}
				k, err := dec.Token()
				if err != nil {
					return err
				}
				b.Write(mustMarshal(k))
				b.WriteString(": ")
				if err := pyArgsValue(dec, b); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			b.WriteByte('}')
		case '[':
			b.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					b.WriteString(", ")
				}
				if err := pyArgsValue(dec, b); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			b.WriteByte(']')
		}
	case nil:
		b.WriteString("null")
	case json.Number:
		b.WriteString(x.String())
	default:
		b.Write(mustMarshal(x))
	}
	return nil
}
