package edge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
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

// jsonString decodes raw, a JSON string that encoding/json has already
// validated. Strings without escapes (most message contents) are taken as
// they are, without a second pass of encoding/json.
func jsonString(raw json.RawMessage) (string, error) {
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' &&
		bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : n-1]), nil
	}
	var s string
	err := json.Unmarshal(raw, &s)
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
	err := json.Unmarshal(raw, v)
	if err == nil {
		return nil
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return invalid("", "malformed JSON at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		// encoding/json names struct fields but not array indexes
		// ("messages.role"); walking the tokens up to the error's offset
		// recovers the exact path.
		path, ok := pathAt(raw, typ.Offset)
		if !ok {
			path = jsonPath(typ.Field)
		}
		param := joinPath(prefix, path)
		if param == "" {
			return invalid("", "request body must be a JSON object, not %s", typ.Value)
		}
		return invalid(param, "%s must be %s, not %s", param, jsonType(typ.Type.String()), typ.Value)
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

// pathFrame is one open object or array while walking a JSON document.
type pathFrame struct {
	array     bool
	index     int    // array: index of the current element
	key       string // object: key of the current member
	expectKey bool   // object: the next token is a key or '}'
}

// pathAt returns the path (fields and [indexes]) of the first JSON value in
// doc that ends at or after offset: the value encoding/json was decoding
// when it reported an UnmarshalTypeError at that offset. Only called on
// the error path, so its cost does not matter.
func pathAt(doc []byte, offset int64) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var stack []pathFrame
	// done marks a value of the innermost container as complete.
	done := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].array {
				stack[n-1].index++
			} else {
				stack[n-1].expectKey = true
			}
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		n := len(stack)
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:n-1]
			done()
			continue
		}
		if n > 0 && stack[n-1].expectKey {
			stack[n-1].key, _ = tok.(string)
			stack[n-1].expectKey = false
			continue
		}
		if dec.InputOffset() >= offset {
			return formatPath(stack), true
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, pathFrame{expectKey: true})
		case json.Delim('['):
			stack = append(stack, pathFrame{array: true})
		default:
			done()
		}
	}
}

func formatPath(stack []pathFrame) string {
	var b strings.Builder
	for _, f := range stack {
		if f.array {
			b.WriteString("[" + strconv.Itoa(f.index) + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(f.key)
	}
	return b.String()
}

// jsonPath turns encoding/json's "messages.role" field into a param; the
// fallback when pathAt cannot place the error.
func jsonPath(field string) string {
	parts := strings.Split(field, ".")
	var b strings.Builder
	for i, p := range parts {
		if p != "" && p[0] >= '0' && p[0] <= '9' {
			fmt.Fprintf(&b, "[%s]", p)
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

// jsonType names a Go type as the JSON type a client should send.
func jsonType(goType string) string {
	goType = strings.TrimPrefix(goType, "*")
	switch {
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "an integer"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	}
	return "an object"
}

// isNull reports whether a raw field is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// firstByte is the first non-space byte of raw, or 0.
func firstByte(raw json.RawMessage) byte {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return 0
	}
	return t[0]
}

// requireModel checks the model field.
func requireModel(m *string) (string, *apiError) {
	if m == nil || *m == "" {
		return "", invalid("model", "model is required")
	}
	if !strings.Contains(*m, "/") {
		return "", invalid("model", "model %q must be of the form <namespace>/<model_name>, for example builtin/echo", *m)
	}
	if !validModelID(*m) {
		return "", invalid("model", "model %q is not a valid <namespace>/<model_name> id", *m)
	}
	return *m, nil
}
