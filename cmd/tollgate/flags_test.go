package main

import (
	"context"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/lockedbuf"
	"github.com/tollgate-dev/tollgate/server/appliance"
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
		{"shutdown-grace", "-1s", "must be 0 or more"},
	} {
		for _, cmd := range []string{"dev", "gateway"} {
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
	if c.maxBodyBytes != 8<<20 || c.bodyTimeout != time.Minute || c.shutdownGrace != appliance.DefaultShutdownGrace ||
		c.applianceGrace() != appliance.DefaultShutdownGrace || a.headInterval != appliance.DefaultHeadInterval {
		t.Errorf("defaults: %+v, head interval %s", c, a.headInterval)
	}
	c, a = parse("--max-body-bytes", "1", "--body-read-timeout", "1ms", "--shutdown-grace", "0", "--head-interval", "1s")
	if c.maxBodyBytes != 1 || c.bodyTimeout != time.Millisecond || c.shutdownGrace != 0 || a.headInterval != time.Second {
		t.Errorf("parsed: %+v, head interval %s", c, a.headInterval)
	}
	// 0 is no grace at all, which appliance.Config spells negative.
	if c.applianceGrace() >= 0 {
		t.Errorf("--shutdown-grace 0 reaches the appliance as %s", c.applianceGrace())
	}
}
