package policy

import (
	"maps"
	"slices"
	"testing"

	"buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate"
	"google.golang.org/protobuf/proto"

	policyv1 "github.com/tollgate-dev/tollgate/gen/tollgate/policy/v1"
)

// TestEffortValuesAgree: the input document shares a term for each value
// the PolicyService contract allows, and for no other.
func TestEffortValuesAgree(t *testing.T) {
	fd := (&policyv1.Request{}).ProtoReflect().Descriptor().Fields().ByName("reasoning_effort")
	rules, _ := proto.GetExtension(fd.Options(), validate.E_Field).(*validate.FieldRules)
	want := slices.Sorted(slices.Values(rules.GetString().GetIn()))
	if got := slices.Sorted(maps.Keys(effortValues)); len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("effortValues %v, the contract allows %v", got, want)
	}
}
