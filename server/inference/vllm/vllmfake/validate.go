package vllmfake

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
)

// validationError is one of the errors FastAPI/pydantic report for a body
// that does not fit the request model. vLLM replaces FastAPI's 422 with a
// 400 in its own shape: {"error":{"message":"N validation error(s):\n
// <each error as a Python dict>","type":"Bad Request","param":<loc of the
// first error>,"code":400}}. The fake keeps that shape and the spelling of
// pydantic's error types and messages for the cases it detects; the exact
// message text of real pydantic varies between versions and is not
// something a client should parse.
type validationError struct {
	typ   string // pydantic error type, e.g. "missing"
	loc   string // cleaned location, e.g. "body.messages"
	msg   string
	input string // Python repr of the (summarised) input
	ctx   string // Python repr of ctx, or ""
	plain string // a bare string error (vLLM raises some that way)
	param string // overrides loc as the response's param (a VLLMValidationError's parameter)
}

func (e validationError) String() string {
	if e.plain != "" {
		return e.plain
	}
	s := fmt.Sprintf("{'type': '%s', 'loc': '%s', 'msg': %s, 'input': %s", e.typ, e.loc, pyRepr(e.msg), e.input)
	if e.ctx != "" {
		s += ", 'ctx': " + e.ctx
	}
	return s + "}"
}

func writeValidation(w http.ResponseWriter, errs ...validationError) {
	label := "error"
	if len(errs) != 1 {
		label = "errors"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d validation %s:\n", len(errs), label)
	for _, e := range errs {
		b.WriteString("  " + e.String() + "\n")
	}
	var param any
	switch {
	case len(errs) > 0 && errs[0].param != "":
		param = errs[0].param
	case len(errs) > 0 && errs[0].plain == "":
		param = errs[0].loc
	}
	writeJSON(w, http.StatusBadRequest, obj{{"error", obj{
		{"message", strings.TrimRight(b.String(), "\n ")},
		{"type", "Bad Request"},
		{"param", param},
		{"code", http.StatusBadRequest},
	}}})
}

// checkJSONRequest is vLLM's validate_json_request: a POST body must be
// declared application/json.
func checkJSONRequest(w http.ResponseWriter, r *http.Request) bool {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if strings.ToLower(mt) == "application/json" {
		return true
	}
	writeValidation(w, validationError{plain: "Unsupported Media Type: Only 'application/json' is allowed"})
	return false
}

// decode unmarshals body into dst and reports what pydantic would if it
// does not fit: invalid JSON, a body that is not an object, or a field of
// the wrong type.
func decode(w http.ResponseWriter, body []byte, dst any) bool {
	err := json.Unmarshal(body, dst)
	if err == nil {
		return true
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		// Python's json reports where the bad character is; Go counts it
		// as read, except at the end of the input.
		off := syn.Offset
		if syn.Offset < int64(len(body)) || !strings.Contains(syn.Error(), "end of JSON input") {
			off--
		}
		off = max(off, 0)
		writeValidation(w, validationError{
			typ: "json_invalid", loc: "body." + strconv.FormatInt(off, 10),
			msg: "JSON decode error", input: "'<dict of 0 items>'", ctx: "{'error': 'Expecting value'}",
		})
	case errors.As(err, &typ) && typ.Field == "":
		writeValidation(w, validationError{
			typ: "model_attributes_type", loc: "body",
			msg: "Input should be a valid dictionary or object to extract fields from", input: summarise(body),
		})
	case errors.As(err, &typ):
		t, m := pydanticType(typ.Type)
		writeValidation(w, validationError{
			typ: t, loc: "body." + typ.Field, msg: m, input: fieldInput(body, typ.Field),
		})
	default:
		writeValidation(w, validationError{
			typ: "json_invalid", loc: "body.0", msg: "JSON decode error",
			input: "'<dict of 0 items>'", ctx: "{'error': 'Expecting value'}",
		})
	}
	return false
}

func pydanticType(t reflect.Type) (string, string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "string_type", "Input should be a valid string"
	case reflect.Bool:
		return "bool_type", "Input should be a valid boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "int_type", "Input should be a valid integer"
	case reflect.Float32, reflect.Float64:
		return "float_type", "Input should be a valid number"
	case reflect.Slice, reflect.Array:
		return "list_type", "Input should be a valid list"
	}
	return "dict_type", "Input should be a valid dictionary"
}

// fieldInput finds the value at a dotted Go field path in body and
// summarises it as vLLM's validation handler does.
func fieldInput(body []byte, path string) string {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return "None"
	}
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			break
		}
		v = m[k]
	}
	return summariseValue(v)
}

func summarise(body []byte) string {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return "None"
	}
	return summariseValue(v)
}

// summariseValue is vLLM's _summarize_error_input, then Python's repr:
// containers are described, not shown; long strings are cut.
func summariseValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "'None'"
	case string:
		if len(x) > 200 {
			x = x[:200] + "...[truncated]"
		}
		return pyRepr(x)
	case bool:
		if x {
			return "'True'"
		}
		return "'False'"
	case float64:
		return pyRepr(strconv.FormatFloat(x, 'f', -1, 64))
	case []any:
		return fmt.Sprintf("'<list of %d items>'", len(x))
	case map[string]any:
		return fmt.Sprintf("'<dict of %d items>'", len(x))
	}
	return "None"
}

// pyRepr is Python's repr of a str (the common cases).
func pyRepr(s string) string {
	q := "'"
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		q = `"`
	}
	r := strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\r", `\r`, "\t", `\t`)
	s = r.Replace(s)
	if q == "'" {
		s = strings.ReplaceAll(s, "'", `\'`)
	}
	return q + s + q
}

func missing(field string, body []byte) validationError {
	return validationError{typ: "missing", loc: "body." + field, msg: "Field required", input: summarise(body)}
}

// valueError is a ValueError raised in a pydantic model validator, which
// pydantic reports against the whole body.
func valueError(msg string, body []byte) validationError {
	return validationError{
		typ: "value_error", loc: "body", msg: "Value error, " + msg, input: summarise(body),
		ctx: "{'error': ValueError(" + pyRepr(msg) + ")}",
	}
}
