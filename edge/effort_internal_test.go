package edge

import (
	"slices"
	"testing"

	"buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	policyv1 "github.com/tollgate-dev/tollgate/gen/tollgate/policy/v1"
	"github.com/tollgate-dev/tollgate/internal/openai"
)

// TestReasoningEffortsAgree: the reasoning_effort values the edge accepts
// are exactly those the contracts it passes them through allow (the
// inference completion and count requests, the policy request), so that a
// value added in one place only fails here, not as an internal error at
// the first request that carries it.
func TestReasoningEffortsAgree(t *testing.T) {
	want := slices.Sorted(slices.Values(openai.ReasoningEfforts))
	for _, m := range []proto.Message{&inferencev1.ChatCompletionRequest{}, &inferencev1.CountTokensRequest{}, &policyv1.Request{}} {
		d := m.ProtoReflect().Descriptor()
		fd := d.Fields().ByName("reasoning_effort")
		if fd == nil {
			t.Errorf("%s has no reasoning_effort", d.FullName())
			continue
		}
		if got := slices.Sorted(slices.Values(allowedStrings(fd))); !slices.Equal(got, want) {
			t.Errorf("%s.reasoning_effort allows %v, the edge %v", d.FullName(), got, want)
		}
	}
}

// allowedStrings is a string field's protovalidate `in` list.
func allowedStrings(fd protoreflect.FieldDescriptor) []string {
	rules, _ := proto.GetExtension(fd.Options(), validate.E_Field).(*validate.FieldRules)
	return rules.GetString().GetIn()
}
