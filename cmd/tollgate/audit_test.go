package main

import (
	"context"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/lockedbuf"
)

// TestAuditCheckDisk: the report and the exit status follow --budget
// (no timing is asserted: a budget of an hour is always met, one of a
// nanosecond never).
func TestAuditCheckDisk(t *testing.T) {
	for _, c := range []struct {
		budget string
		code   int
		want   string
	}{
		{"1h", 0, "within budget: the audit step's p99"},
		{"1ns", exitOverBudget, "OVER BUDGET: the audit step's p99"},
	} {
		t.Run(c.budget, func(t *testing.T) {
			var out, errOut lockedbuf.Buffer
			dir := t.TempDir()
			code := run(context.Background(), []string{"audit", "check-disk", "--dir", dir, "--events", "200", "--rate", "8000", "--budget", c.budget}, &out, &errOut)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, c.code, errOut.String())
			}
			for _, want := range []string{"Audit log on " + dir + ": 200 events at 8000/s (Poisson)", "disk flush", "commit floor", "audit step", c.want} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}

func TestAuditCheckDiskUsage(t *testing.T) {
	for _, args := range [][]string{
		{"audit"},
		{"audit", "nope"},
		{"audit", "check-disk"},
		{"audit", "check-disk", "--dir", ".", "--budget", "0s"},
	} {
		var out, errOut lockedbuf.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, errOut.String())
		}
	}
	var out, errOut lockedbuf.Buffer
	if code := run(context.Background(), []string{"audit", "check-disk", "--dir", t.TempDir(), "--events", "5"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "events 5") {
		t.Errorf("5 events: exit %d, stderr %q", code, errOut.String())
	}
}
