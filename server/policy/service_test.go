package policy_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	policyv1 "github.com/tollgate-dev/tollgate/gen/tollgate/policy/v1"
	"github.com/tollgate-dev/tollgate/internal/grpctest"
	"github.com/tollgate-dev/tollgate/server/policy"
)

// dial serves PolicyService with the default bundle over a real gRPC
// server, interceptors included.
func dial(t *testing.T) policyv1.PolicyServiceClient {
	t.Helper()
	return dialBundle(t, "../../examples/policy")
}

// dialBundle serves PolicyService with the bundle at path.
func dialBundle(t *testing.T, path string) policyv1.PolicyServiceClient {
	t.Helper()
	e, err := policy.Load(context.Background(), path, policy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) {
		policyv1.RegisterPolicyServiceServer(s, policy.NewService(e))
	})
	return policyv1.NewPolicyServiceClient(conn)
}

func request(label string, scopes []string, tools ...string) *policyv1.DecideRequest {
	return &policyv1.DecideRequest{
		Version: 1,
		Key: &policyv1.Key{
			TenantId: "acme", KeyId: "key_abc", Label: label, Scopes: scopes,
			Models: []string{"builtin/echo"},
		},
		Request: &policyv1.Request{
			RequestId: "req_abc", Endpoint: policyv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS,
			Model: "builtin/echo", Tools: tools, MessageCount: 1,
			ToolChoice: &inferencev1.ToolChoice{Mode: inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_AUTO},
		},
		ApplianceId: "app_test",
		Time:        timestamppb.Now(),
	}
}

var decID = regexp.MustCompile(`^dec_[0-9a-f]{32}$`)

func TestServiceDecide(t *testing.T) {
	c := dial(t)
	ctx := context.Background()
	named := request("app", []string{"tool:get_weather"}, "get_weather")
	named.Request.ToolChoice = &inferencev1.ToolChoice{Mode: inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_FUNCTION, FunctionName: "delete_repo"}
	otherModel := request("app", nil)
	otherModel.Request.Model = "builtin/embed"
	otherModel.Request.Endpoint = policyv1.Endpoint_ENDPOINT_EMBEDDINGS

	tests := []struct {
		name     string
		req      *policyv1.DecideRequest
		allow    bool
		deniedBy policyv1.DeniedBy
		tools    []string
		reason   string
	}{
		{name: "in-scope tool", req: request("app", []string{"tool:get_weather"}, "get_weather"), allow: true, tools: []string{"get_weather"}, reason: "allowed"},
		{name: "tool:*", req: request("app", []string{"tool:*"}, "a", "b"), allow: true, tools: []string{"a", "b"}, reason: "allowed"},
		{name: "out-of-scope tool", req: request("app", []string{"tool:get_weather"}, "delete_repo"), deniedBy: policyv1.DeniedBy_DENIED_BY_TOOL_SCOPE, reason: `tool "delete_repo" is not covered`},
		{name: "named out-of-scope tool", req: named, deniedBy: policyv1.DeniedBy_DENIED_BY_TOOL_SCOPE, reason: `tool_choice names tool "delete_repo"`},
		{name: "model outside the key", req: otherModel, deniedBy: policyv1.DeniedBy_DENIED_BY_MODEL, reason: `model "builtin/embed"`},
		{name: "bundle rule", req: request("ci", []string{"tool:*"}, "get_weather"), deniedBy: policyv1.DeniedBy_DENIED_BY_BUNDLE, reason: "keys labelled ci may not use tools"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := c.Decide(ctx, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			d := resp.GetDecision()
			if d.GetAllow() != tt.allow || d.GetDeniedBy() != tt.deniedBy || !slices.Equal(d.GetAllowedTools(), tt.tools) {
				t.Fatalf("decision = %v", d)
			}
			if !strings.Contains(d.GetReason(), tt.reason) || !decID.MatchString(d.GetId()) {
				t.Fatalf("decision = %v", d)
			}
			if d.GetBundleRevision() != "tollgate-default-2" || !strings.HasPrefix(d.GetBundleDigest(), "sha256:") {
				t.Fatalf("bundle = %q %q", d.GetBundleRevision(), d.GetBundleDigest())
			}
		})
	}
}

// TestServiceValidation: protovalidate refuses malformed input before the
// engine sees it.
func TestServiceValidation(t *testing.T) {
	c := dial(t)
	tests := []struct {
		name   string
		mutate func(r *policyv1.DecideRequest)
	}{
		{"version 0", func(r *policyv1.DecideRequest) { r.Version = 0 }},
		{"version 2", func(r *policyv1.DecideRequest) { r.Version = 2 }},
		{"no key", func(r *policyv1.DecideRequest) { r.Key = nil }},
		{"no request", func(r *policyv1.DecideRequest) { r.Request = nil }},
		{"bad key id", func(r *policyv1.DecideRequest) { r.Key.KeyId = "abc" }},
		{"bad scope", func(r *policyv1.DecideRequest) { r.Key.Scopes = []string{"tools:x"} }},
		{"models and all_models", func(r *policyv1.DecideRequest) { r.Key.AllModels = true }},
		{"bad tool name", func(r *policyv1.DecideRequest) { r.Request.Tools = []string{"get weather"} }},
		{"duplicate tool", func(r *policyv1.DecideRequest) { r.Request.Tools = []string{"a", "a"} }},
		{"no endpoint", func(r *policyv1.DecideRequest) { r.Request.Endpoint = policyv1.Endpoint_ENDPOINT_UNSPECIFIED }},
		{"no model for chat", func(r *policyv1.DecideRequest) { r.Request.Model = "" }},
		{"temperature too high", func(r *policyv1.DecideRequest) { r.Request.Temperature = proto.Float64(3) }},
		{"max_tokens 0", func(r *policyv1.DecideRequest) { r.Request.MaxTokens = proto.Int64(0) }},
		{"reasoning_effort not a value", func(r *policyv1.DecideRequest) { r.Request.ReasoningEffort = proto.String("extreme") }},
		{"reasoning_effort empty", func(r *policyv1.DecideRequest) { r.Request.ReasoningEffort = proto.String("") }},
		{"reasoning_effort in capitals", func(r *policyv1.DecideRequest) { r.Request.ReasoningEffort = proto.String("High") }},
		{"bad appliance id", func(r *policyv1.DecideRequest) { r.ApplianceId = "appliance-1" }},
		{"bad request id", func(r *policyv1.DecideRequest) { r.Request.RequestId = "abc" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := request("app", []string{"tool:*"}, "get_weather")
			tt.mutate(req)
			_, err := c.Decide(context.Background(), req)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("err = %v, want InvalidArgument", err)
			}
		})
	}

	// The models endpoint needs no model; unset time means now.
	req := request("app", nil)
	req.Request.Endpoint = policyv1.Endpoint_ENDPOINT_MODELS
	req.Request.Model = ""
	req.Time = nil
	if resp, err := c.Decide(context.Background(), req); err != nil || !resp.GetDecision().GetAllow() {
		t.Fatalf("models endpoint: %v %v", resp, err)
	}
}

// TestServiceReasoningEffort: the request's reasoning_effort reaches the
// bundle as input.request.reasoning_effort, absent when unset.
func TestServiceReasoningEffort(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		".manifest": `{"revision": "effort-1", "roots": ["tollgate"]}`,
		"tollgate/gateway.rego": `package tollgate.gateway

effort := object.get(input.request, "reasoning_effort", "unset")

decision := {"allow": false, "reason": sprintf("reasoning_effort %s is not allowed", [effort])} if {
	effort in {"xhigh", "max"}
} else := {"allow": true, "reason": sprintf("effort %s", [effort])}
`,
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := dialBundle(t, dir)
	for _, tt := range []struct {
		effort string // "" for unset
		allow  bool
		reason string
	}{
		{"xhigh", false, "reasoning_effort xhigh is not allowed"},
		{"max", false, "reasoning_effort max is not allowed"},
		{"low", true, "effort low"},
		{"none", true, "effort none"},
		{"", true, "effort unset"},
	} {
		req := request("app", []string{"tool:*"}, "get_weather")
		if tt.effort != "" {
			req.Request.ReasoningEffort = proto.String(tt.effort)
		}
		resp, err := c.Decide(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		d := resp.GetDecision()
		if d.GetAllow() != tt.allow || d.GetReason() != tt.reason || !decID.MatchString(d.GetId()) {
			t.Errorf("effort %q: decision %v, want allow=%v reason=%q", tt.effort, d, tt.allow, tt.reason)
		}
		if !tt.allow && d.GetDeniedBy() != policyv1.DeniedBy_DENIED_BY_BUNDLE {
			t.Errorf("effort %q: denied_by %v", tt.effort, d.GetDeniedBy())
		}
	}
}

// TestServiceEndpoints: every endpoint the enum defines reaches the bundle
// as the path the in-process decisions give it (input.request.endpoint),
// so a bundle rule on an endpoint holds over gRPC too; a value added to
// the enum without its path fails here.
func TestServiceEndpoints(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		".manifest": `{"revision": "endpoint-1", "roots": ["tollgate"]}`,
		"tollgate/gateway.rego": `package tollgate.gateway

decision := {"allow": true, "reason": sprintf("endpoint %s", [object.get(input.request, "endpoint", "unset")])}
`,
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := dialBundle(t, dir)
	want := map[policyv1.Endpoint]policy.Endpoint{
		policyv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS: policy.EndpointChatCompletions,
		policyv1.Endpoint_ENDPOINT_EMBEDDINGS:       policy.EndpointEmbeddings,
		policyv1.Endpoint_ENDPOINT_MODELS:           policy.EndpointModels,
		policyv1.Endpoint_ENDPOINT_COMPLETIONS:      policy.EndpointCompletions,
	}
	values := policyv1.Endpoint(0).Descriptor().Values()
	for i := range values.Len() {
		ep := policyv1.Endpoint(values.Get(i).Number())
		if ep == policyv1.Endpoint_ENDPOINT_UNSPECIFIED {
			continue
		}
		t.Run(ep.String(), func(t *testing.T) {
			path, ok := want[ep]
			if !ok {
				t.Fatalf("%v has no expected path in this test", ep)
			}
			req := request("app", []string{"tool:*"}, "get_weather")
			req.Request.Endpoint = ep
			resp, err := c.Decide(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if d := resp.GetDecision(); !d.GetAllow() || d.GetReason() != "endpoint "+string(path) {
				t.Errorf("decision %v, want the bundle to see endpoint %s", d, path)
			}
		})
	}
}
