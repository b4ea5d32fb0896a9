package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"syscall"
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
	// The exit status is 128 + the signal's number, as a shell reports
	// it; 130 when the run ended without one.
	for _, c := range []struct {
		name  string
		cause error
		want  int
	}{
		{"no signal", context.Canceled, exitInterrupted},
		{"SIGINT", signalled{syscall.SIGINT}, 130},
		{"SIGTERM", signalled{syscall.SIGTERM}, 143},
	} {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(c.cause)
		for _, args := range [][]string{{}, {"--json"}} {
			var out, errOut lockedbuf.Buffer
			dir := t.TempDir()
			code := run(ctx, append([]string{"audit", "check-disk", "--dir", dir, "--events", "200"}, args...), &out, &errOut)
			if code != c.want || !strings.Contains(errOut.String(), "interrupted") || !strings.Contains(errOut.String(), "no verdict") || out.String() != "" {
				t.Errorf("%s %v: exit %d, stdout %q, stderr %q; want %d and no verdict", c.name, args, code, out.String(), errOut.String(), c.want)
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("%s %v: left behind: %v", c.name, args, left)
			}
		}
	}
}

// TestNotifyContext: a signal ends the context with a cause naming it,
// which is also context.Canceled; stop ends it with none.
func TestNotifyContext(t *testing.T) {
	ctx, stop := notifyContext(context.Background(), syscall.SIGUSR2)
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	if got := signalExit(ctx, 1); got != 128+int(syscall.SIGUSR2) || !errors.Is(context.Cause(ctx), context.Canceled) {
		t.Fatalf("after SIGUSR2: exit %d, cause %v", got, context.Cause(ctx))
	}
	ctx2, stop2 := notifyContext(context.Background(), syscall.SIGUSR2)
	stop2()
	<-ctx2.Done()
	if got := signalExit(ctx2, 1); got != 1 {
		t.Fatalf("stopped without a signal: exit %d, want the fallback", got)
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
