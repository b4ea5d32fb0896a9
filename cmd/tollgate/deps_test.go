package main

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/internal/lockedbuf"
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

// TestBodyRetentionFlag: --body-retention takes days or a duration from a
// day to 7 years; 0 (in any unit) is refused with the allowed range, not
// taken as the 90-day default.
func TestBodyRetentionFlag(t *testing.T) {
	parse := func(args ...string) (time.Duration, error) {
		var a applianceFlags
		fs := flag.NewFlagSet("tollgate", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		a.register(fs)
		err := fs.Parse(args)
		return time.Duration(a.retention), err
	}
	if got, err := parse(); err != nil || got != auditlog.DefaultRetention {
		t.Fatalf("default = %s, %v", got, err)
	}
	for value, want := range map[string]time.Duration{"1d": 24 * time.Hour, "30d": 30 * 24 * time.Hour, "2160h": 90 * 24 * time.Hour, "2557d": auditlog.MaxRetention} {
		if got, err := parse("--body-retention", value); err != nil || got != want {
			t.Errorf("--body-retention %s = %s, %v; want %s", value, got, err, want)
		}
	}
	for _, value := range []string{"0d", "0s", "0", "0h", "23h", "2558d", "-1d", "-24h"} {
		_, err := parse("--body-retention", value)
		if err == nil || !strings.Contains(err.Error(), "from 1d to 2557d") && !strings.Contains(err.Error(), "not a whole number") {
			t.Errorf("--body-retention %s: %v", value, err)
		}
	}
	var out, errOut lockedbuf.Buffer
	code := run(context.Background(), []string{"gateway", "--body-retention", "0d"}, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "body-retention") || !strings.Contains(errOut.String(), "from 1d to 2557d") {
		t.Fatalf("gateway --body-retention 0d: exit %d, stderr %q", code, errOut.String())
	}
}
