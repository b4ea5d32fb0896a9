package edge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// modelIDRe (<namespace>/<model_name>) and toolNameRe match the constraints
// of the inference proto, so malformed input is refused here with a clear
// param rather than by the internal service.
var (
	modelIDRe  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}/[A-Za-z0-9][A-Za-z0-9._:/-]{0,191}$`)
	toolNameRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

// decodeJSON decodes body into v. Unknown fields are ignored, as OpenAI
// does; a syntax or type error becomes a 400 naming the field.
func decodeJSON(body []byte, v any) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return invalid("", "request body is empty; expected a JSON object")
	}
	err := json.Unmarshal(body, v)
	if err == nil {
		return nil
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return invalid("", "malformed JSON at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return invalid("", "request body must be a JSON object, not %s", typ.Value)
		}
		param := jsonPath(typ.Field)
		return invalid(param, "%s must be %s, not %s", param, jsonType(typ.Type.String()), typ.Value)
	}
	return invalid("", "malformed JSON: %v", err)
}

// jsonPath turns encoding/json's "messages.0.role" into "messages[0].role".
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
	if !modelIDRe.MatchString(*m) {
		return "", invalid("model", "model %q is not a valid <namespace>/<model_name> id", *m)
	}
	return *m, nil
}
