package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/tollgate-dev/tollgate/audit/diskcheck"
	"github.com/tollgate-dev/tollgate/audit/syncload"
)

// check-disk's exit statuses besides 0 (within budget), 1 (the run
// failed) and 2 (usage).
const (
	// exitOverBudget: the audit step's p99 is over --budget; the run
	// itself worked.
	exitOverBudget = 3
	// exitInterrupted: an interrupt ended the run before its verdict:
	// 128 + the signal's number, as a shell reports a command a signal
	// ended (130 for Ctrl-C, 143 for SIGTERM), so that a script tells it
	// from a failed run or a verdict; 130 when no signal did.
	exitInterrupted = 130
)

// runAudit holds the audit log's tools; `check-disk` measures what a
// durable audit event costs on a disk, before a site puts its data there;
// `export` writes a tenant's day as an evidence bundle.
func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "export" {
		return runAuditExport(ctx, args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "check-disk" {
		fmt.Fprintln(stderr, "Usage: tollgate audit check-disk --dir DIR [--events N] [--rate N] [--even] [--budget D] [--json]\n"+
			"       tollgate audit export --data DIR --tenant T --day YYYY-MM-DD --out FILE")
		return errUsage
	}
	fs := flag.NewFlagSet("tollgate audit check-disk", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opts diskcheck.Options
	fs.StringVar(&opts.Dir, "dir", "", "a directory on the disk to measure: the one the audit journal is (to be) on, "+
		"the data directory or dev's and gateway's --audit-journal-dir; required")
	fs.IntVar(&opts.Events, "events", diskcheck.DefaultEvents, fmt.Sprintf("events each stage offers (100 to %d)", diskcheck.MaxEvents))
	fs.IntVar(&opts.Rate, "rate", diskcheck.DefaultRate, "events per second offered, as requests finishing")
	fs.BoolVar(&opts.Even, "even", false, "space arrivals evenly instead of as a Poisson process")
	budget := fs.Duration("budget", diskcheck.DefaultBudget, "what the audit step may add to a request at p99; over it, exit status 3")
	asJSON := fs.Bool("json", false, "print the figures as one JSON object (milliseconds), for scripts checking many appliances")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if opts.Dir == "" {
		fmt.Fprintln(stderr, "--dir is required")
		return errUsage
	}
	if *budget <= 0 {
		fmt.Fprintln(stderr, "--budget must be positive")
		return errUsage
	}
	rep, err := diskcheck.Run(ctx, opts)
	if errors.Is(err, diskcheck.ErrInterrupted) {
		fmt.Fprintf(stderr, "tollgate audit: %v; no verdict\n", err)
		return exitCode(signalExit(ctx, exitInterrupted))
	}
	if err != nil {
		return err
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(diskReportJSON(rep, *budget)); err != nil {
			return err
		}
	} else {
		writeDiskReport(stdout, rep, *budget)
	}
	if !rep.Within(*budget) {
		return exitCode(exitOverBudget)
	}
	return nil
}

// writeDiskReport prints a run's figures and its verdict against budget.
func writeDiskReport(w io.Writer, rep diskcheck.Report, budget time.Duration) {
	o := rep.Options
	arrivals := "Poisson"
	if o.Even {
		arrivals = "evenly spaced"
	}
	fmt.Fprintf(w, "Audit log on %s: %d events at %d/s (%s), four tenants, ~1 KiB in and ~2 KiB out each\n\n", o.Dir, o.Events, o.Rate, arrivals)
	fmt.Fprintf(w, "%-13s %9s %9s %9s %9s\n", "", "p50", "p99", "p99.9", "max")
	row := func(name string, s syncload.Summary, what string) {
		fmt.Fprintf(w, "%-13s %9s %9s %9s %9s  %s\n", name, ms(s.P50), ms(s.P99), ms(s.P999), ms(s.Max), what)
	}
	row("disk flush", rep.Syncs, fmt.Sprintf("one 4 KiB write and fdatasync at a time (%d)", rep.Syncs.N))
	row("commit floor", rep.Floor, "the least any durable group commit costs at this rate")
	row("audit step", rep.Append, fmt.Sprintf("the audit log's append (%.0f events/s, %.1f events per sync)", rep.EventsPerSecond, rep.EventsPerCommit))
	fmt.Fprintln(w)
	if rep.Late > 0 {
		fmt.Fprintf(w, "%d arrivals started over 5 ms late (the machine was busy, or the disk stalled with %d appends waiting): the tail is understated.\n", rep.Late, syncload.MaxInFlight)
	}
	if rep.Within(budget) {
		fmt.Fprintf(w, "within budget: the audit step's p99 %s ≤ %s\n", ms(rep.Append.P99), ms(budget))
		return
	}
	fmt.Fprintf(w, "OVER BUDGET: the audit step's p99 %s > %s\n", ms(rep.Append.P99), ms(budget))
	if rep.Floor.P99 > budget {
		fmt.Fprintf(w, "The commit floor alone is %s at p99: no durable log meets the budget on this disk at this rate. Give the audit journal a faster disk of its own (--audit-journal-dir; docs/audit-format.md).\n", ms(rep.Floor.P99))
	}
}

// ms is d in milliseconds with two decimals.
func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", msFloat(d)) }

// diskReport is check-disk's --json output; durations are milliseconds.
type diskReport struct {
	Dir             string      `json:"dir"`
	Events          int         `json:"events"`
	Rate            int         `json:"rate"`
	Arrivals        string      `json:"arrivals"`
	BudgetMS        float64     `json:"budget_ms"`
	WithinBudget    bool        `json:"within_budget"`
	FloorOverBudget bool        `json:"floor_over_budget"`
	Late            int         `json:"late_arrivals"`
	EventsPerSecond float64     `json:"events_per_second"`
	EventsPerSync   float64     `json:"events_per_sync"`
	DiskFlush       stageReport `json:"disk_flush"`
	CommitFloor     stageReport `json:"commit_floor"`
	AuditStep       stageReport `json:"audit_step"`
}

type stageReport struct {
	N      int     `json:"n"`
	P50MS  float64 `json:"p50_ms"`
	P99MS  float64 `json:"p99_ms"`
	P999MS float64 `json:"p999_ms"`
	MaxMS  float64 `json:"max_ms"`
}

func diskReportJSON(rep diskcheck.Report, budget time.Duration) diskReport {
	arrivals := "poisson"
	if rep.Options.Even {
		arrivals = "even"
	}
	stage := func(s syncload.Summary) stageReport {
		return stageReport{N: s.N, P50MS: msFloat(s.P50), P99MS: msFloat(s.P99), P999MS: msFloat(s.P999), MaxMS: msFloat(s.Max)}
	}
	return diskReport{
		Dir: rep.Options.Dir, Events: rep.Options.Events, Rate: rep.Options.Rate, Arrivals: arrivals,
		BudgetMS: msFloat(budget), WithinBudget: rep.Within(budget), FloorOverBudget: rep.Floor.P99 > budget,
		Late: rep.Late, EventsPerSecond: rep.EventsPerSecond, EventsPerSync: rep.EventsPerCommit,
		DiskFlush: stage(rep.Syncs), CommitFloor: stage(rep.Floor), AuditStep: stage(rep.Append),
	}
}

// msFloat is d in milliseconds.
func msFloat(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
