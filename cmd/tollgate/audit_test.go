package main

import (
	"context"
	"encoding/json"
	"os"
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

// TestAuditCheckDiskInterrupted: an interrupt (the context ending) gives
// no verdict, says so, exits 130 (not the over-budget 3 nor the error 1)
// and leaves nothing in --dir. That it does not wait for a stalled disk is
// diskcheck's test.
func TestAuditCheckDiskInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, args := range [][]string{{}, {"--json"}} {
		var out, errOut lockedbuf.Buffer
		dir := t.TempDir()
		code := run(ctx, append([]string{"audit", "check-disk", "--dir", dir, "--events", "200"}, args...), &out, &errOut)
		if code != exitInterrupted || !strings.Contains(errOut.String(), "interrupted") || !strings.Contains(errOut.String(), "no verdict") || out.String() != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d and no verdict", args, code, out.String(), errOut.String(), exitInterrupted)
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("%v: left behind: %v", args, left)
		}
	}
}

// TestAuditCheckDiskJSON: --json prints the same run as one object whose
// verdict agrees with the exit status and whose figures are ordered.
func TestAuditCheckDiskJSON(t *testing.T) {
	for _, c := range []struct {
		budget string
		code   int
	}{{"1h", 0}, {"1ns", exitOverBudget}} {
		t.Run(c.budget, func(t *testing.T) {
			var out, errOut lockedbuf.Buffer
			dir := t.TempDir()
			code := run(context.Background(), []string{"audit", "check-disk", "--dir", dir, "--events", "200", "--rate", "8000", "--even", "--budget", c.budget, "--json"}, &out, &errOut)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, c.code, errOut.String())
			}
			var rep diskReport
			dec := json.NewDecoder(strings.NewReader(out.String()))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&rep); err != nil {
				t.Fatalf("output %q: %v", out.String(), err)
			}
			if rep.Dir != dir || rep.Events != 200 || rep.Rate != 8000 || rep.Arrivals != "even" || rep.WithinBudget != (c.code == 0) {
				t.Fatalf("report %+v", rep)
			}
			for name, s := range map[string]stageReport{"disk_flush": rep.DiskFlush, "commit_floor": rep.CommitFloor, "audit_step": rep.AuditStep} {
				if s.N != 200 || s.P50MS <= 0 || s.P50MS > s.P99MS || s.P99MS > s.P999MS || s.P999MS > s.MaxMS {
					t.Errorf("%s: %+v", name, s)
				}
			}
			if rep.WithinBudget != (rep.AuditStep.P99MS <= rep.BudgetMS) {
				t.Errorf("within_budget %t, p99 %v ms, budget %v ms", rep.WithinBudget, rep.AuditStep.P99MS, rep.BudgetMS)
			}
		})
	}
}
