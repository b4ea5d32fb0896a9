// Command tollgate runs Tollgate. One binary, one subcommand per role:
//
//	tollgate dev      everything in one process on loopback, for development
//	tollgate gateway  an appliance gateway against an external etcd cluster
//	tollgate fleet    the fleet PKI (init-ca, issue)
//	tollgate central  the central plane: heads of every appliance, audit API
//	tollgate verify   check a head, proof, consistency proof or fork of the audit API offline
//	tollgate portal   the operator portal's administrators (add-admin, set-password, remove-admin, list-admins)
//	tollgate audit    audit log tools (check-disk: what a durable event costs on a disk)
//
// Run `tollgate <command> -h` for a command's flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"syscall"

	"github.com/tollgate-dev/tollgate/internal/gctune"
	"github.com/tollgate-dev/tollgate/internal/sysmon"
)

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	// server marks a command that serves until stopped: it runs with
	// the runtime's system monitor kept out of its deep sleep (sysmon).
	server bool
}

var commands = []command{
	{"dev", "run everything in one process on loopback, state in --data", runDev, true},
	{"gateway", "run an appliance gateway against an external etcd cluster", runGateway, true},
	{"fleet", "fleet PKI: init-ca makes the fleet CA, issue an appliance certificate", runFleet, false},
	{"central", "run the central plane: appliances publish heads to it, tenants read heads and proofs", runCentral, true},
	{"verify", "verify a head, proof, consistency or forks document of the audit API, a receipt or an evidence bundle offline, against the fleet CA", runVerify, false},
	{"portal", "operator portal administrators: add-admin, set-password, remove-admin, list-admins", runPortal, false},
	{"audit", "audit log tools: check-disk measures what a durable audit event costs on a disk; export writes a tenant's day as an evidence bundle", runAudit, false},
}

func main() {
	if len(os.Args) > 1 && isServer(os.Args[1]) {
		// First: this starts the process over (GODEBUG is read at start).
		if err := sysmon.Reexec(); err != nil {
			fmt.Fprintf(os.Stderr, "tollgate: %v; running with the runtime's defaults\n", err)
		}
	}
	gctune.Apply() // before anything allocates much; GOGC in the environment wins
	ctx, stop := notifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal starts a graceful shutdown (--shutdown-grace);
	// from then on the signals get Go's default handling, so that a
	// second one kills the process at once.
	context.AfterFunc(ctx, stop)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// isServer reports whether name is a command that serves until stopped.
func isServer(name string) bool {
	for _, c := range commands {
		if c.name == name {
			return c.server
		}
	}
	return false
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		var ec exitCoder
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		case errors.As(err, new(badFlags)):
			// Flags that parse but do not go together: a usage error,
			// which a supervisor must not retry (exit 2).
			fmt.Fprintf(stderr, "tollgate %s: %v\n", c.name, err)
			return 2
		case errors.As(err, &ec):
			// The command chose its exit status and wrote its output.
			return ec.ExitCode()
		default:
			fmt.Fprintf(stderr, "tollgate %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "tollgate: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// exitCoder is an error that carries the process exit status.
type exitCoder interface {
	error
	ExitCode() int
}

// errUsage marks an error already reported by flag parsing.
var errUsage = errors.New("usage")

// badFlags is an error of flags that parse but are missing or do not go
// together: like a flag that does not parse, it exits 2, which no restart
// can fix (a file a flag names that cannot be read is not one: it exits 1,
// as it may be there at the next start).
type badFlags struct{ msg string }

func (b badFlags) Error() string { return b.msg }

// flagsErr returns a badFlags error.
func flagsErr(format string, args ...any) error {
	return badFlags{fmt.Sprintf(format, args...)}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: tollgate <command> [flags]\n\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
}

// parseFlags parses args, turning flag errors into errUsage (the flag
// package has already printed them).
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %v\n", fs.Args())
		return errUsage
	}
	return nil
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, flagsErr("--log-level: %v", err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}
