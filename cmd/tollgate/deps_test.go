package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/tollgate-dev/tollgate/server/policy"
)

// TestPolicyVerificationFlags: the bundle verification flags are OPA's
// (--verification-key, --verification-key-id, --signing-alg, --scope) with
// a policy- prefix and OPA's defaults, and reach policy.LoadOptions.
func TestPolicyVerificationFlags(t *testing.T) {
	parse := func(args ...string) (policy.LoadOptions, error) {
		var a applianceFlags
		fs := flag.NewFlagSet("tollgate", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		a.register(fs)
		if err := fs.Parse(args); err != nil {
			return policy.LoadOptions{}, err
		}
		return a.loadOptions()
	}

	opts, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	if want := (policy.LoadOptions{KeyID: "default", Algorithm: "RS256"}); opts != want {
		t.Fatalf("defaults = %+v, want %+v", opts, want)
	}

	key := filepath.Join(t.TempDir(), "public.pem")
	if err := os.WriteFile(key, []byte("-----BEGIN PUBLIC KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err = parse("--policy-verification-key", key, "--policy-verification-key-id", "ops",
		"--policy-signing-alg", "ES256", "--policy-scope", "tollgate")
	if err != nil {
		t.Fatal(err)
	}
	want := policy.LoadOptions{VerificationKey: "-----BEGIN PUBLIC KEY-----\n", KeyID: "ops", Algorithm: "ES256", Scope: "tollgate"}
	if opts != want {
		t.Fatalf("options = %+v, want %+v", opts, want)
	}

	if _, err := parse("--policy-verification-key", filepath.Join(t.TempDir(), "missing.pem")); err == nil {
		t.Fatal("a missing verification key file was accepted")
	}
	if _, err := parse("--policy-key-id", "ops"); err == nil {
		t.Fatal("--policy-key-id is still accepted; it is --policy-verification-key-id, as in OPA")
	}
}
