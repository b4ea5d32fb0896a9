package edge

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// toolNameRe matches the constraint of the inference proto (as
// validModelID does for model ids), so malformed input is refused here with
// a clear param rather than by the internal service.
var toolNameRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// validModelID reports whether id matches the inference proto's model
// pattern ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}/[A-Za-z0-9][A-Za-z0-9._:/-]{0,191}$,
// without a regexp: it runs on every request.
func validModelID(id string) bool {
	ns, name, ok := strings.Cut(id, "/")
	return ok && idPart(ns, 64, "._-") && idPart(name, 192, "._:/-")
}

// idPart reports whether s is 1 to max characters, a letter or digit first,
// then letters, digits or bytes of extra.
func idPart(s string, max int, extra string) bool {
	if len(s) == 0 || len(s) > max || !alnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !alnum(s[i]) && strings.IndexByte(extra, s[i]) < 0 {
			return false
		}
	}
	return true
}

func alnum(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// decodeOptions are the request decoder's: encoding/json/v2 semantics
// (github.com/go-json-experiment/json mirrors it until the standard
// library's is out of its experiment), so a member name matches a field
// only if it is spelled exactly as the field's tag. OpenAI's API treats
// "Model" or "STREAM" as unknown fields; folding them onto model and
// stream, as encoding/json v1 does, would let a proxy in front of the
// gateway read a different model than the one served. The option keeps
// what v1 did for invalid UTF-8 in a string: it becomes U+FFFD
// rather than a 400.
//
// A name given twice in one object, at any depth, is refused (400): v1
// took the last value, other parsers take the first, so a proxy or an
// auditor reading the stored body could see another model or tool set than
// the one served. I-JSON (RFC 7493), which the audit leaf's canonical form
// (RFC 8785) also assumes, forbids duplicate names.
var decodeOptions = json.JoinOptions(
	jsontext.AllowInvalidUTF8(true),
)

// unmarshal decodes raw into v with decodeOptions, reporting errors as
// they come (for callers that name the field themselves).
func unmarshal(raw []byte, v any) error {
	return json.Unmarshal(raw, v, decodeOptions)
}

// jsonString decodes raw, a JSON string that has already been validated.
// Strings without escapes (most message contents) are taken as they are,
// without a second pass of the decoder.
func jsonString(raw jsontext.Value) (string, error) {
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' &&
		bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : n-1]), nil
	}
	var s string
	err := unmarshal(raw, &s)
	return s, err
}

// decodeJSON decodes body into v. Unknown fields are ignored, as OpenAI
// does; a syntax or type error becomes a 400 naming the field.
func decodeJSON(body []byte, v any) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return invalid("", "request body is empty; expected a JSON object")
	}
	return decodeJSONAt(body, v, "")
}

// decodeJSONAt decodes raw, found at path prefix of the request (empty for
// the body itself), into v. A type error is a 400 whose param is the full
// path of the offending value, array indexes included:
// messages[1].tool_calls[0].function.name.
func decodeJSONAt(raw []byte, v any, prefix string) *apiError {
	err := unmarshal(raw, v)
	if err == nil {
		return nil
	}
	var syn *jsontext.SyntacticError
	var sem *json.SemanticError
	switch {
	case errors.Is(err, jsontext.ErrDuplicateName) && errors.As(err, &syn):
		param := joinPath(prefix, pointerPath(raw, syn.JSONPointer))
		return invalid(param, "%s is given more than once; each name may appear once in a JSON object", param)
	case errors.As(err, &syn):
		return invalid("", "malformed JSON at byte %d: %v", syn.ByteOffset, syn.Err)
	case errors.As(err, &sem) && sem.GoType != nil && sem.JSONKind != 0:
		param := joinPath(prefix, pointerPath(raw, sem.JSONPointer))
		got := jsonKind(sem.JSONKind, sem.JSONValue)
		if param == "" {
			return invalid("", "request body must be a JSON object, not %s", got)
		}
		if sem.JSONKind == '0' && outOfRange(sem) {
			return invalid(param, "%s %s is out of range%s", param, sem.JSONValue, rangeOf(param))
		}
		return invalid(param, "%s must be %s, not %s", param, jsonType(sem.GoType), got)
	}
	return invalid("", "malformed JSON: %v", err)
}

// joinPath appends path (a field name or [index] first) to prefix.
func joinPath(prefix, path string) string {
	if prefix == "" || path == "" || path[0] == '[' {
		return prefix + path
	}
	return prefix + "." + path
}

// pointerPath turns the JSON Pointer of a decoding error ("/messages/1/role")
// into a param ("messages[1].role"), reading doc, the JSON decoded, to tell
// an array index from an object member named by digits, inside values
// kept raw as elsewhere. Only called on the error path; where doc cannot be
// followed (it is malformed past the error), tokens read as member names.
func pointerPath(doc []byte, ptr jsontext.Pointer) string {
	var b strings.Builder
	member := func(name string) {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(name)
	}
	dec := jsontext.NewDecoder(bytes.NewReader(doc),
		jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	follow := true
	for tok := range ptr.Tokens() {
		var kind jsontext.Kind
		if follow {
			t, err := dec.ReadToken()
			follow = err == nil
			kind = t.Kind()
		}
		if kind != '[' {
			member(tok)
			follow = follow && kind == '{' && seekMember(dec, tok)
			continue
		}
		b.WriteString("[" + tok + "]")
		n, err := strconv.Atoi(tok)
		follow = err == nil
		for i := 0; follow && i < n; i++ {
			follow = dec.SkipValue() == nil
		}
	}
	return b.String()
}

// seekMember reads an object's members up to name's value (its first
// occurrence), reporting whether it got there.
func seekMember(dec *jsontext.Decoder, name string) bool {
	for {
		t, err := dec.ReadToken()
		if err != nil || t.Kind() != '"' {
			return false
		}
		if t.String() == name {
			return true
		}
		if dec.SkipValue() != nil {
			return false
		}
	}
}

// outOfRange reports whether a number that did not decode is too large
// for its Go type (1e400 for a float64, 2^64 or 1e30 for an int64), rather
// than of the wrong kind (1.5 or 1e2 for an int64, which encoding/json
// also refused as "not number 1.5").
func outOfRange(sem *json.SemanticError) bool {
	if errors.Is(sem.Err, strconv.ErrRange) {
		return true
	}
	t := sem.GoType
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() < reflect.Int || t.Kind() > reflect.Uint64 {
		return false
	}
	f, err := strconv.ParseFloat(string(sem.JSONValue), 64)
	if err != nil {
		return errors.Is(err, strconv.ErrRange) // beyond any float64
	}
	return f == math.Trunc(f) && (f >= 1<<63 || f < -(1<<63))
}

// rangeOf is the range of values OpenAI accepts for a number field, for
// the message of one that is out of range.
func rangeOf(param string) string {
	switch {
	case param == "temperature":
		return " [0, 2]"
	case param == "top_p":
		return " [0, 1]"
	case param == "frequency_penalty", param == "presence_penalty":
		return " [-2, 2]"
	case strings.HasPrefix(param, "logit_bias."):
		return " [-100, 100]"
	}
	return ""
}

// jsonKind names the JSON value a client sent, as encoding/json v1 did:
// "string", "number 1.5", "object".
func jsonKind(k jsontext.Kind, v jsontext.Value) string {
	switch k {
	case '"':
		return "string"
	case '0':
		if len(v) > 0 {
			return "number " + string(v)
		}
		return "number"
	case 't', 'f':
		return "bool"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return k.String()
}

// jsonType names a Go type as the JSON type a client should send.
func jsonType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// isNull reports whether a raw field is absent or JSON null.
func isNull(raw jsontext.Value) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// firstByte is the first non-space byte of raw, or 0.
func firstByte(raw jsontext.Value) byte {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return 0
	}
	return t[0]
}

// requireModel checks the model field (absent and null read as "").
func requireModel(m string) (string, *apiError) {
	if m == "" {
		return "", invalid("model", "model is required")
	}
	if !strings.Contains(m, "/") {
		return "", invalid("model", "model %q must be of the form <namespace>/<model_name>, for example builtin/echo", m)
	}
	if !validModelID(m) {
		return "", invalid("model", "model %q is not a valid <namespace>/<model_name> id", m)
	}
	return m, nil
}
