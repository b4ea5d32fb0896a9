package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/audit/fleet"
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
	if opts, err := parse("--policy-no-memo"); err != nil || !opts.NoDecisionMemo {
		t.Fatalf("--policy-no-memo: %+v, %v; want the decision memo off", opts, err)
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

// TestAuditJournalDirFlag: --audit-journal-dir, taken by dev and gateway,
// reaches the audit log's options (empty: the default DATA/audit/journal),
// and the log opened from the flags journals there.
func TestAuditJournalDirFlag(t *testing.T) {
	parse := func(args ...string) applianceFlags {
		t.Helper()
		var a applianceFlags
		set := flag.NewFlagSet("tollgate", flag.ContinueOnError)
		set.SetOutput(io.Discard)
		a.register(set)
		if err := set.Parse(args); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return a
	}
	logger := slog.New(slog.DiscardHandler)
	app := &fleet.Appliance{ID: "app_flagtest"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--audit-journal-dir", "/srv/fast/journal"}, "/srv/fast/journal"},
		{[]string{"--audit-journal-dir=journal"}, "journal"},
	} {
		a := parse(tc.args...)
		if got := a.auditOptions(app, logger).JournalDir; got != tc.want {
			t.Errorf("%v: JournalDir %q, want %q", tc.args, got, tc.want)
		}
	}

	for _, cmd := range []string{"dev", "gateway"} {
		var out, errOut lockedbuf.Buffer
		if code := run(context.Background(), []string{cmd, "-h"}, &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "\n  -audit-journal-dir DIR\n") {
			t.Errorf("%s -h: exit %d, no -audit-journal-dir DIR in\n%s", cmd, code, errOut.String())
		}
	}

	data, journal := t.TempDir(), filepath.Join(t.TempDir(), "journal")
	signer, _, err := fleet.EnsureDev(data, "app_flagtest")
	if err != nil {
		t.Fatal(err)
	}
	a := parse("--audit-journal-dir", journal)
	l, err := a.openAudit(data, signer, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := os.Stat(filepath.Join(journal, auditlog.JournalIDFile)); err != nil {
		t.Errorf("the journal directory of the flag: %v", err)
	}
	if _, err := os.Stat(filepath.Join(data, "audit", auditlog.JournalDir)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("DATA/audit/journal exists beside --audit-journal-dir: %v", err)
	}
}
