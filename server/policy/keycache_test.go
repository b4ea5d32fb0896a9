package policy

import (
	"testing"

	policyv1 "github.com/tollgate-dev/tollgate/gen/tollgate/policy/v1"
)

// TestKeyTermsFollowPrincipal: a changed key record is a new Principal and
// gets its own input.key, never the cached one of its predecessor.
func TestKeyTermsFollowPrincipal(t *testing.T) {
	e := load(t, defaultBundle)
	ci := key("ci", nil, "tool:*")
	if d := decide(t, e, chat(ci, auto, "get_weather")); d.Allow {
		t.Fatalf("ci key allowed: %+v", d)
	}
	relabelled := key("app", nil, "tool:*") // same tenant and key id
	if d := decide(t, e, chat(relabelled, auto, "get_weather")); !d.Allow {
		t.Fatalf("relabelled key denied: %+v", d)
	}
	if d := decide(t, e, chat(ci, auto, "get_weather")); d.Allow {
		t.Fatalf("ci key allowed on second use: %+v", d)
	}
}

// TestKeyTermsAreBounded: short-lived Principals (the gRPC service builds
// one per call) do not pile up in the cache.
func TestKeyTermsAreBounded(t *testing.T) {
	e := load(t, defaultBundle)
	for range maxKeyTerms + 10 {
		e.keys.get(key("app", nil))
	}
	n := 0
	e.keys.m.Range(func(any, any) bool { n++; return true })
	if n > maxKeyTerms {
		t.Fatalf("%d cached keys, bound %d", n, maxKeyTerms)
	}
	if d := decide(t, e, chat(key("ci", nil, "tool:*"), auto, "x")); d.Allow {
		t.Fatalf("after a reset: %+v", d)
	}
}

// TestServiceKeysAreNotCached: the gRPC service builds a Principal per
// call, each up to tens of KB of models and scopes; caching them kept
// thousands until the cache emptied (hundreds of MB). They are decided
// without entering the cache.
func TestServiceKeysAreNotCached(t *testing.T) {
	e := load(t, defaultBundle)
	req := &policyv1.DecideRequest{
		Key:     &policyv1.Key{TenantId: "acme", KeyId: "key_grpc", AllModels: true},
		Request: &policyv1.Request{RequestId: "req_1", Endpoint: policyv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Model: "builtin/echo"},
	}
	for range 10 {
		if d := decide(t, e, InputFromProto(req)); !d.Allow {
			t.Fatalf("denied: %+v", d)
		}
	}
	if n := e.keys.n.Load(); n != 0 {
		t.Fatalf("%d per-call keys cached, want none", n)
	}
}
