package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tollgate-dev/tollgate/audit/bundle"
	"github.com/tollgate-dev/tollgate/audit/fleet"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// serveExport serves the audit export socket in the data directory's
// audit directory for as long as the appliance runs (audit.db is locked
// by the appliance, so a second process reads through it). The returned
// stop closes it and waits; a socket that cannot be bound (a path too
// long for a Unix socket) is warned about, and export then needs the
// appliance stopped.
func serveExport(ctx context.Context, dataDir string, src bundle.Source, logger *slog.Logger) (stop func()) {
	path := filepath.Join(dataDir, "audit", bundle.SocketName)
	ln, err := bundle.Listen(path)
	if err != nil {
		logger.Warn("audit export unavailable while running", "err", err)
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := bundle.Serve(ctx, ln, src, logger.With(slog.String("component", "audit-export"))); err != nil {
			logger.Error("audit export socket", "err", err)
		}
	}()
	return func() {
		cancel()
		<-done
		_ = os.Remove(path)
	}
}

// runAuditExport writes the evidence bundle of one tenant's day: through
// the running appliance's export socket when it answers, else from the
// files of a stopped appliance. The output is written to a temporary file
// beside FILE and renamed over it only when whole.
func runAuditExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tollgate audit export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "", "the appliance's data directory (required)")
	tenant := fs.String("tenant", "", "tenant id (required)")
	day := fs.String("day", "", "UTC day, YYYY-MM-DD (required)")
	out := fs.String("out", "", "the bundle file to write (required)")
	journalDir := fs.String("audit-journal-dir", "", "stopped appliance only: its --audit-journal-dir, if it had one")
	certFile := fs.String("appliance-cert", "", "stopped appliance only: its certificate (default DATA/"+fleet.ApplianceCertFile+")")
	keyFile := fs.String("appliance-key", "", "stopped appliance only: its key (default DATA/"+fleet.ApplianceKeyFile+")")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var problem string
	switch {
	case *data == "" || *tenant == "" || *day == "" || *out == "":
		problem = "--data, --tenant, --day and --out are required"
	case ids.CheckTenant(*tenant) != nil:
		problem = ids.CheckTenant(*tenant).Error()
	}
	if problem == "" {
		if _, err := ids.ParseDay(*day); err != nil {
			problem = "--day: " + err.Error()
		}
	}
	if problem != "" {
		fmt.Fprintf(stderr, "tollgate audit export: %s\n", problem)
		return errUsage
	}
	tmp, err := os.CreateTemp(filepath.Dir(*out), "."+filepath.Base(*out)+".tmp-*")
	if err != nil {
		return fmt.Errorf("tollgate audit export: %w", err)
	}
	defer os.Remove(tmp.Name())
	via := "the running appliance"
	sock := filepath.Join(*data, "audit", bundle.SocketName)
	err = bundle.Fetch(ctx, sock, *tenant, *day, tmp)
	if isNoListener(err) {
		via = "the stopped appliance's files"
		err = exportFromFiles(tmp, *data, *journalDir, *certFile, *keyFile, *tenant, *day)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), *out)
	}
	if err != nil {
		return fmt.Errorf("tollgate audit export: %w", err)
	}
	fmt.Fprintf(stdout, "Wrote the bundle of %s/%s to %s (from %s).\n", *tenant, *day, *out, via)
	return nil
}

// isNoListener reports whether a fetch failed because no appliance serves
// the export socket (none, or one left by an appliance that ended).
func isNoListener(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}

// exportFromFiles opens the audit log of a stopped appliance (replaying
// its journal, as a start would) and writes the bundle. It signs nothing.
func exportFromFiles(w io.Writer, data, journalDir, certFile, keyFile, tenant, day string) error {
	if certFile == "" {
		certFile = filepath.Join(data, fleet.ApplianceCertFile)
	}
	if keyFile == "" {
		keyFile = filepath.Join(data, fleet.ApplianceKeyFile)
	}
	signer, err := fleet.LoadAppliance(certFile, keyFile)
	if err != nil {
		return err
	}
	lock, err := lockDataDir(data)
	if err != nil {
		return err
	}
	defer lock.Close()
	l, err := auditlog.Open(filepath.Join(data, "audit"), auditlog.Options{
		Signer: signer, JournalDir: journalDir,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return err
	}
	defer l.Close()
	return bundle.Write(w, l, tenant, day, time.Now())
}
