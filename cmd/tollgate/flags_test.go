package main

import (
	"context"
	"flag"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/appliance"
	"github.com/tollgate-dev/tollgate/internal/lockedbuf"
)

// A duration or size of 0 or less would be taken silently for a default
// (or printed as is in the banner while the default is used): it is
// refused with the flag's error line and exit status 2, before anything
// starts.
func TestServingFlagsRefuseNonPositive(t *testing.T) {
	for _, tc := range []struct{ flag, value, msg string }{
		{"head-interval", "-5s", "must be above 0"},
		{"head-interval", "0", "must be above 0"},
		{"head-interval", "5", "not a duration"},
		{"max-body-bytes", "-5", "must be above 0"},
		{"max-body-bytes", "0", "must be above 0"},
		{"max-body-bytes", "1k", "not a whole number"},
		{"body-read-timeout", "0", "must be above 0"},
		{"body-read-timeout", "-1s", "must be above 0"},
		{"write-stall-timeout", "0", "must be above 0"},
		{"write-stall-timeout", "-1s", "must be above 0"},
		{"shutdown-grace", "-1s", "must be 0 or more"},
		{"shutdown-drain", "-1s", "must be 0 or more"},
		{"central-upload-timeout", "0", "must be above 0"},
		{"central-upload-timeout", "-1s", "must be above 0"},
		{"rest-write-timeout", "0", "must be above 0"},
		{"rest-write-timeout", "-1s", "must be above 0"},
		{"ingest-max-upload-time", "0", "must be above 0"},
		{"ingest-max-upload-time", "-1s", "must be above 0"},
		{"ingest-max-uploads", "0", "must be above 0"},
		{"ingest-max-pending-leaves", "-1", "must be above 0"},
		{"ingest-max-conns", "0", "must be above 0"},
		{"ingest-max-conns-per-host", "0", "must be above 0"},
	} {
		cmds, ok := map[string][]string{
			"shutdown-grace":            {"dev", "gateway", "central"},
			"central-upload-timeout":    {"dev", "gateway"},
			"rest-write-timeout":        {"central"},
			"shutdown-drain":            {"central"},
			"ingest-max-upload-time":    {"central"},
			"ingest-max-uploads":        {"central"},
			"ingest-max-pending-leaves": {"central"},
			"ingest-max-conns":          {"central"},
			"ingest-max-conns-per-host": {"central"},
		}[tc.flag]
		if !ok {
			cmds = []string{"dev", "gateway"}
		}
		for _, cmd := range cmds {
			var out, errOut lockedbuf.Buffer
			code := run(context.Background(), []string{cmd, "--data", t.TempDir(), "--" + tc.flag, tc.value}, &out, &errOut)
			first, _, _ := strings.Cut(errOut.String(), "\n")
			want := `invalid value "` + tc.value + `" for flag -` + tc.flag + ": " + tc.msg
			if code != 2 || !strings.HasPrefix(first, want) || out.String() != "" {
				t.Errorf("%s --%s %s: exit %d, first line %q; want 2 and %q", cmd, tc.flag, tc.value, code, first, want)
			}
		}
	}
}

// The flags' defaults, and the values they accept.
func TestServingFlagsAccept(t *testing.T) {
	parse := func(args ...string) (commonFlags, applianceFlags) {
		t.Helper()
		var c commonFlags
		var a applianceFlags
		fs := flag.NewFlagSet("tollgate", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.register(fs)
		a.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return c, a
	}
	c, a := parse()
	if c.maxBodyBytes != 8<<20 || c.bodyTimeout != time.Minute || c.writeStall != 30*time.Second || c.shutdownGrace != appliance.DefaultShutdownGrace ||
		c.applianceConfig(&a).ShutdownGrace != appliance.DefaultShutdownGrace || a.headInterval != appliance.DefaultHeadInterval {
		t.Errorf("defaults: %+v, head interval %s", c, a.headInterval)
	}
	c, a = parse("--max-body-bytes", "1", "--body-read-timeout", "1ms", "--write-stall-timeout", "2ms", "--shutdown-grace", "0", "--head-interval", "1s")
	if c.maxBodyBytes != 1 || c.bodyTimeout != time.Millisecond || c.writeStall != 2*time.Millisecond || c.shutdownGrace != 0 || a.headInterval != time.Second ||
		c.applianceConfig(&a).WriteStallTimeout != 2*time.Millisecond {
		t.Errorf("parsed: %+v, head interval %s", c, a.headInterval)
	}
	// 0 is no grace at all, which appliance.Config spells negative.
	if g := c.applianceConfig(&a).ShutdownGrace; g >= 0 {
		t.Errorf("--shutdown-grace 0 reaches the appliance as %s", g)
	}
	// Tracing is off unless a collector is named.
	if cfg := c.applianceConfig(&a); cfg.OTLPEndpoint != "" || cfg.OTLPInsecure {
		t.Errorf("tracing on by default: %q, insecure %v", cfg.OTLPEndpoint, cfg.OTLPInsecure)
	}
	c, a = parse("--otlp-endpoint", "collector:4317", "--otlp-insecure")
	if cfg := c.applianceConfig(&a); cfg.OTLPEndpoint != "collector:4317" || !cfg.OTLPInsecure {
		t.Errorf("--otlp-endpoint reaches the appliance as %q, insecure %v", cfg.OTLPEndpoint, cfg.OTLPInsecure)
	}
}

// Every command's help names each flag's value with one word: the flag
// package takes a back-quoted word of the usage text for that name, so a
// back-quoted phrase would show up as the placeholder.
func TestHelpPlaceholders(t *testing.T) {
	flagLine := regexp.MustCompile(`^  -(\S+)(?: (.*))?$`)
	for _, args := range [][]string{{"dev"}, {"gateway"}, {"central"}, {"verify"}, {"fleet", "init-ca"}, {"fleet", "issue"}} {
		var out, errOut lockedbuf.Buffer
		if code := run(context.Background(), append(args, "-h"), &out, &errOut); code != 0 {
			t.Errorf("%v -h: exit %d", args, code)
		}
		flags := 0
		for _, line := range strings.Split(errOut.String(), "\n") {
			m := flagLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			flags++
			if strings.Contains(m[2], " ") {
				t.Errorf("%v -h: -%s has the placeholder %q", args, m[1], m[2])
			}
		}
		if flags == 0 {
			t.Errorf("%v -h listed no flags:\n%s", args, errOut.String())
		}
	}
}

// verify without --ca says so, above the usage.
func TestVerifyRequiresCA(t *testing.T) {
	var out, errOut lockedbuf.Buffer
	code := run(context.Background(), []string{"verify", "head", "heads.json"}, &out, &errOut)
	if first, _, _ := strings.Cut(errOut.String(), "\n"); code != 2 || first != "tollgate verify: --ca is required" {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}

// A policy bundle that cannot be loaded is reported once, by the final
// error line, not also by an ERROR log line.
func TestMissingPolicyReportedOnce(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-bundle")
	var out, errOut lockedbuf.Buffer
	code := run(context.Background(), []string{"dev", "--data", t.TempDir(), "--policy", missing,
		"--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--portal-addr", "127.0.0.1:0", "--central-addr", "127.0.0.1:0"}, &out, &errOut)
	var mentions []string
	for _, line := range strings.Split(errOut.String(), "\n") {
		if strings.Contains(line, "no-such-bundle") {
			mentions = append(mentions, line)
		}
	}
	if code != 1 || len(mentions) != 1 || !strings.HasPrefix(mentions[0], "tollgate dev: policy bundle ") {
		t.Fatalf("exit %d, lines naming the bundle %q", code, mentions)
	}
}
