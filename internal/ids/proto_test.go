package ids_test

import (
	"regexp"
	"sort"
	"strings"
	"testing"

	"buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/tollgate-dev/tollgate/gen/tollgate/audit/v1"
	_ "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
	_ "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	_ "github.com/tollgate-dev/tollgate/gen/tollgate/keys/v1"
	_ "github.com/tollgate-dev/tollgate/gen/tollgate/policy/v1"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// idFields names, by proto field name, the format a field of that name
// holds. A field so named that carries a pattern must carry this one.
var idFields = map[string]string{
	"tenant_id":          ids.TenantPattern,
	"key_id":             ids.KeyPattern,
	"appliance_id":       ids.AppliancePattern,
	"request_id":         ids.RequestPattern,
	"policy_decision_id": ids.DecisionPattern,
	"day":                ids.DayPattern,
	"model":              ids.ModelPattern,
	"models":             ids.ModelPattern,
}

// matchesRE finds the regular expression of a CEL rule's
// this.matches('^…$').
var matchesRE = regexp.MustCompile(`\.matches\('((?:[^'\\]|\\.)*)'\)`)

// idPrefixRE recognises a pattern of a prefixed id (key_, app_, req_,
// dec_), optional or not, whatever its field is named.
var idPrefixRE = regexp.MustCompile(`^\^\(?(` + ids.KeyPrefix + `|` + ids.AppliancePrefix + `|` + ids.RequestPrefix + `|` + ids.DecisionPrefix + `)`)

// rulePattern is one pattern a field's protovalidate rules carry.
type rulePattern struct {
	pattern string
	where   string // string.pattern, repeated.items, cel <id>, ...
}

// patternsOf returns every regular expression of a field's rules: its
// string pattern, those of a repeated field's items and a map's keys and
// values, and those its CEL rules match against.
func patternsOf(r *validate.FieldRules, where string) []rulePattern {
	if r == nil {
		return nil
	}
	var out []rulePattern
	if p := r.GetString().GetPattern(); p != "" {
		out = append(out, rulePattern{p, where + "string.pattern"})
	}
	for _, c := range r.GetCel() {
		for _, m := range matchesRE.FindAllStringSubmatch(c.GetExpression(), -1) {
			// CEL single-quoted strings escape a backslash as \\.
			out = append(out, rulePattern{strings.ReplaceAll(m[1], `\\`, `\`), where + "cel " + c.GetId()})
		}
	}
	out = append(out, patternsOf(r.GetRepeated().GetItems(), where+"repeated.items.")...)
	out = append(out, patternsOf(r.GetMap().GetKeys(), where+"map.keys.")...)
	out = append(out, patternsOf(r.GetMap().GetValues(), where+"map.values.")...)
	return out
}

// sameFormat reports whether the proto's pattern p is want, or the
// optional form of want, ^(X)?$ where want is ^X$.
func sameFormat(p, want string) bool {
	body := strings.TrimSuffix(strings.TrimPrefix(want, "^"), "$")
	return p == want || p == "^("+body+")?$"
}

// TestProtoPatternsAreTheGoFormats reads the protovalidate rules of every
// message of the generated code and checks each id field's pattern against
// this package's: the protos copy the formats, and must not drift from them.
func TestProtoPatternsAreTheGoFormats(t *testing.T) {
	checked := map[string]int{} // field name -> patterns checked
	files := 0
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if !strings.HasPrefix(string(fd.Package()), "tollgate.") {
			return true
		}
		files++
		var walk func(protoreflect.MessageDescriptors)
		walk = func(msgs protoreflect.MessageDescriptors) {
			for i := range msgs.Len() {
				md := msgs.Get(i)
				walk(md.Messages())
				for j := range md.Fields().Len() {
					f := md.Fields().Get(j)
					rules, _ := proto.GetExtension(f.Options(), validate.E_Field).(*validate.FieldRules)
					name := string(f.Name())
					want, isID := idFields[name]
					for _, p := range patternsOf(rules, "") {
						switch {
						case isID:
							checked[name]++
							if !sameFormat(p.pattern, want) {
								t.Errorf("%s (%s): pattern %q, want the Go format %q (internal/ids) or its optional form", f.FullName(), p.where, p.pattern, want)
							}
						case idPrefixRE.MatchString(p.pattern):
							t.Errorf("%s (%s): pattern %q looks like an id's; name the field in idFields to check it", f.FullName(), p.where, p.pattern)
						}
					}
				}
			}
		}
		walk(fd.Messages())
		return true
	})
	if files < 5 {
		t.Fatalf("read %d tollgate proto files from the registry, want the 5 of gen/", files)
	}
	// Every format the protos carry today is checked at least once, so that
	// a renamed field cannot leave the test checking nothing.
	for _, name := range []string{"tenant_id", "key_id", "appliance_id", "request_id", "day", "model", "models"} {
		if checked[name] == 0 {
			t.Errorf("no pattern of a %s field was found to check", name)
		}
	}
	names := make([]string, 0, len(checked))
	for n := range checked {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Logf("%s: %d patterns checked", n, checked[n])
	}
}

// TestFormatsCompile: every format is a valid RE2 expression, as
// protovalidate needs it to be.
func TestFormatsCompile(t *testing.T) {
	for _, p := range []string{ids.TenantPattern, ids.KeyPattern, ids.AppliancePattern, ids.RequestPattern,
		ids.DecisionPattern, ids.ModelPattern, ids.ModelNamespacePattern, ids.ModelNamePattern, ids.DayPattern} {
		if _, err := regexp.Compile(p); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
}
