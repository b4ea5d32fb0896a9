package rest

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"buf.build/go/protovalidate"
	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/grpc-ecosystem/grpc-gateway/v2/utilities"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/tollgate-dev/tollgate/central/apierr"
	"github.com/tollgate-dev/tollgate/central/auth"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
	"github.com/tollgate-dev/tollgate/internal/grpcserver"
)

// requests are the request messages of the gateway's routes, by the
// route's pattern (runtime.Pattern.String()): the fields a query may set.
//
// The table is written by hand, and a route missing from it fails closed:
// check answers it 500 internal_error, logged with the route, and never
// passes it on unchecked. It cannot be derived at run time: the gate runs
// before the route's generated handler, which is where the RPC is named,
// so all it knows is the matched pattern, and the HTTP rules are external
// configuration (central_http.yaml) that the service descriptor does not
// carry; deriving would mean re-implementing grpc-gateway's template
// syntax to match Pattern.String(). TestEveryRouteIsGated walks the
// service's methods and the HTTP rules and sends each route a repeated
// parameter, so a route added without its entry fails the tests, not a
// client.
var requests = map[string]protoreflect.MessageDescriptor{
	"/v1/tenants/{tenant_id=*}/audit/heads":       (&centralv1.ListHeadsRequest{}).ProtoReflect().Descriptor(),
	"/v1/tenants/{tenant_id=*}/audit/proof":       (&centralv1.GetProofRequest{}).ProtoReflect().Descriptor(),
	"/v1/tenants/{tenant_id=*}/audit/forks":       (&centralv1.ListForksRequest{}).ProtoReflect().Descriptor(),
	"/v1/tenants/{tenant_id=*}/audit/history":     (&centralv1.ListTreeHeadsRequest{}).ProtoReflect().Descriptor(),
	"/v1/tenants/{tenant_id=*}/audit/consistency": (&centralv1.GetConsistencyProofRequest{}).ProtoReflect().Descriptor(),
}

// gate checks a request the gateway routed before the route's handler
// reads it. The handler parses the query string before the gRPC call, and
// refuses some queries itself (a parameter given twice, a malformed
// escape), which would answer them ahead of the token check of the gRPC
// server's interceptor. gate checks the token and the tenant of the path
// first, with the functions the interceptor uses (so with the same
// status, code and message), then the query: what the parser would
// refuse is refused here, in words naming the parameter and together with
// the request's other problems (withTheOthers). Unknown paths
// and other methods never reach it: they are answered before the token,
// as before.
type gate struct {
	tokens *auth.Tokens
	mux    *runtime.ServeMux // for the error handler
}

func (g *gate) middleware(next runtime.HandlerFunc) runtime.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, pathParams map[string]string) {
		r, err := g.check(r, pathParams)
		if err != nil {
			_, out := runtime.MarshalerForRequest(g.mux, r)
			runtime.HTTPError(r.Context(), g.mux, out, w, r, err)
			return
		}
		next(w, r, pathParams)
	}
}

// check returns the request to hand to the route's handler, or the
// error to answer.
func (g *gate) check(r *http.Request, pathParams map[string]string) (*http.Request, error) {
	tenant, err := g.tokens.Authenticate(r.Header.Values("Authorization"))
	if err != nil {
		return r, err
	}
	if id, ok := pathParams["tenant_id"]; ok {
		if err := auth.Permit(tenant, id); err != nil {
			return r, err
		}
	}
	pat, _ := runtime.HTTPPattern(r.Context())
	desc, ok := requests[pat.String()]
	if !ok {
		// The error handler logs it; the client reads "internal error".
		return r, apierr.New(codes.Internal, apierr.ReasonInternal,
			"rest: route "+pat.String()+" has no request message in the gate's table (tokenfirst.go)")
	}
	if r.URL.RawQuery == "" {
		return r, nil
	}
	problems := map[int]string{} // by field index, or queryProblem
	// The pairs that parse are kept, so that a malformed one is reported
	// with the request's other problems.
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		problems[queryProblem] = "the query string must be name=value pairs separated by '&', percent-encoded"
	}
	changed := integerPageSize(q, desc)
	for key := range q {
		f := queryField(desc, key)
		if f == nil || plainKey(f, key) {
			continue
		}
		if _, path := pathParams[string(f.Name())]; path {
			// The gateway ignores a path parameter in the query, and
			// so in any form.
			delete(q, key)
			changed = true
			continue
		}
		if !nestedKey(f, key) {
			problems[f.Index()] = string(f.Name()) + " must be given as " + string(f.Name()) + "=value, without brackets or dots"
		}
	}
	fields := desc.Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		if _, path := pathParams[string(f.Name())]; path || f.IsList() || f.IsMap() {
			continue // the gateway ignores a path parameter in the query
		}
		if _, ok := problems[i]; ok {
			continue
		}
		n := len(q[string(f.Name())])
		if f.JSONName() != string(f.Name()) {
			n += len(q[f.JSONName()])
		}
		if n > 1 {
			problems[i] = string(f.Name()) + " must be given once"
			continue
		}
		if msg := uint32Problem(f, q); msg != "" {
			problems[i] = msg
			continue
		}
		// A string the gRPC client cannot encode would fail as an
		// internal error (500) before any validation ran.
		for _, v := range append(q[string(f.Name())], q[f.JSONName()]...) {
			if !utf8.ValidString(v) {
				problems[i] = string(f.Name()) + " must be UTF-8 text"
			}
		}
	}
	if len(problems) > 0 {
		return r, withTheOthers(desc, q, pathParams, problems)
	}
	if changed {
		r = r.Clone(r.Context())
		r.URL.RawQuery = q.Encode()
	}
	return r, nil
}

// queryProblem is the key in problems of a query string that does not
// parse as a whole; it is reported first.
const queryProblem = -2

// withTheOthers is the answer to a query with problems the gateway's
// parser would refuse (by field index): they are reported together with
// the request's other problems, as the validation interceptor would
// report them, in one InvalidArgument message joined by "; ". The request
// is built as the gateway builds it, from the path and from the query
// without the parameters that have a problem, and validated with the
// interceptor's protovalidate rules; the violations keep protovalidate's
// order (the message's own rules, then field by field), each parameter's
// problem takes the place of that field's violations and of the message's
// rules about it (a repeated day is not also "required", a from_size that
// is not a number not also missing).
func withTheOthers(desc protoreflect.MessageDescriptor, q url.Values, pathParams map[string]string, problems map[int]string) error {
	type part struct {
		field int // -1: a rule of the message
		text  string
	}
	var parts []part
	if err := validateRest(desc, q, pathParams, problems); err != nil {
		var verr *protovalidate.ValidationError
		if !errors.As(err, &verr) {
			// A rule that does not compile: the server's fault, as in
			// the interceptor.
			return apierr.New(codes.Internal, apierr.ReasonInternal, "rest: validate "+string(desc.FullName())+": "+err.Error())
		}
		for _, viol := range verr.Violations {
			p := part{field: -1, text: grpcserver.Describe(viol)}
			if el := viol.Proto.GetField().GetElements(); len(el) > 0 {
				if f := desc.Fields().ByName(protoreflect.Name(el[0].GetFieldName())); f != nil {
					p.field = f.Index()
				}
			}
			if _, ok := problems[p.field]; ok {
				continue
			}
			if p.field == -1 {
				// A rule of the message about one parameter (its id
				// starts with the parameter's name and a dot, as
				// from_size.required) says nothing of a parameter whose
				// own problem is reported.
				if f := desc.Fields().ByName(protoreflect.Name(strings.SplitN(viol.Proto.GetRuleId(), ".", 2)[0])); f != nil {
					if _, ok := problems[f.Index()]; ok {
						continue
					}
				}
			}
			parts = append(parts, p)
		}
	}
	idx := make([]int, 0, len(problems))
	for i := range problems {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	for _, i := range idx {
		at := len(parts)
		for j, p := range parts {
			if p.field > i {
				at = j
				break
			}
		}
		parts = slices.Insert(parts, at, part{field: i, text: problems[i]})
	}
	texts := make([]string, len(parts))
	for i, p := range parts {
		texts[i] = p.text
	}
	return apierr.New(codes.InvalidArgument, apierr.ReasonInvalidRequest, strings.Join(texts, "; "))
}

// validateRest validates the request built as the gateway builds it, from
// the path parameters and from the query without the parameters that have
// a problem. A query the gateway's parser still refuses (none should: the
// gate reports what it refuses) is not validated: its problems are
// reported, if not every other.
func validateRest(desc protoreflect.MessageDescriptor, q url.Values, pathParams map[string]string, problems map[int]string) error {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(desc.FullName())
	if err != nil {
		return err
	}
	msg := mt.New().Interface()
	if !populate(msg, q, pathParams, problems) {
		return nil
	}
	return protovalidate.Validate(msg)
}

// populate sets msg as the gateway would, and reports whether it could.
func populate(msg proto.Message, q url.Values, pathParams map[string]string, problems map[int]string) bool {
	desc := msg.ProtoReflect().Descriptor()
	rest := url.Values{}
	for key, vals := range q {
		if f := queryField(desc, key); f != nil {
			if _, bad := problems[f.Index()]; bad {
				continue
			}
			if _, path := pathParams[string(f.Name())]; path {
				continue
			}
		}
		rest[key] = vals
	}
	if runtime.PopulateQueryParameters(msg, rest, utilities.NewDoubleArray(nil)) != nil {
		return false
	}
	for name, val := range pathParams {
		if runtime.PopulateFieldFromPath(msg, name, val) != nil {
			return false
		}
	}
	return true
}

// queryField is the field of desc a query key names (nil: none; the
// gateway ignores such a key): by its name or its JSON name, in any of the
// forms grpc-gateway's parser reads, plain (day), a map entry (day[x]) or
// a nested field (day.x), whatever follows the name.
func queryField(desc protoreflect.MessageDescriptor, key string) protoreflect.FieldDescriptor {
	name := key
	if i := strings.IndexAny(key, "[."); i >= 0 {
		name = key[:i]
	}
	if f := desc.Fields().ByName(protoreflect.Name(name)); f != nil {
		return f
	}
	return desc.Fields().ByJSONName(name)
}

// plainKey reports whether key is f's name or JSON name alone.
func plainKey(f protoreflect.FieldDescriptor, key string) bool {
	return key == string(f.Name()) || key == f.JSONName()
}

// nestedKey reports whether key is a form of f that the gateway's parser
// reads as the API means it: name[k] for a map, name.sub for a singular
// message. The request messages have neither today; any other bracketed
// or dotted form of a parameter (day[x], day.x, day[a][b]) is refused by
// the gate in the API's words: the parser would refuse it in its own
// ("field \"day\" is not a map") or ignore it.
func nestedKey(f protoreflect.FieldDescriptor, key string) bool {
	rest := key[strings.IndexAny(key, "[."):]
	switch {
	case f.IsMap():
		return strings.HasPrefix(rest, "[") && strings.Index(rest, "]") == len(rest)-1
	case f.Message() != nil && !f.IsList():
		return strings.HasPrefix(rest, ".")
	}
	return false
}

// integerPageSize makes a page_size that is not one 32-bit integer (a
// word, a fraction, empty, out of range, given twice, under both its
// names: page_size and its JSON name pageSize) page_size=0, and reports
// whether it changed q. The gateway would refuse it in strconv's words;
// as 0 it reaches the service like any other page_size out of 1–1000, in
// the proto's words ("page_size must be an integer from 1 to 1000")
// beside the request's other problems.
func integerPageSize(q url.Values, desc protoreflect.MessageDescriptor) bool {
	f := desc.Fields().ByName("page_size")
	if f == nil {
		return false
	}
	name, json := string(f.Name()), f.JSONName()
	var vals []string
	for _, key := range []string{name, json} {
		vals = append(vals, q[key]...)
		if json == name {
			break
		}
	}
	if len(vals) == 0 {
		return false
	}
	if len(vals) == 1 {
		if _, err := strconv.ParseInt(vals[0], 10, 32); err == nil {
			return false
		}
	}
	delete(q, json)
	q[name] = []string{"0"}
	return true
}

// uint32Problem is what is wrong with the one value of a uint32 field
// (from) in q, under its name or its JSON name, if it is not a 32-bit
// unsigned integer: the gateway would refuse it in strconv's words.
func uint32Problem(f protoreflect.FieldDescriptor, q url.Values) string {
	if f.Kind() != protoreflect.Uint32Kind || f.IsList() {
		return ""
	}
	vals := append(append([]string(nil), q[string(f.Name())]...), q[f.JSONName()]...)
	if f.JSONName() == string(f.Name()) {
		vals = q[string(f.Name())]
	}
	if len(vals) != 1 {
		return ""
	}
	if _, err := strconv.ParseUint(vals[0], 10, 32); err != nil {
		return string(f.Name()) + " must be an integer from 0 to 4294967295"
	}
	return ""
}
