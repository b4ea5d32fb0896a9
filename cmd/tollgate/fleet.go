package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/tollgate-dev/tollgate/audit/fleet"
)

// runFleet manages the fleet PKI: `init-ca` makes the fleet CA, `issue`
// issues an appliance certificate under it.
func runFleet(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "Usage: tollgate fleet init-ca [--dir DIR] | tollgate fleet issue --appliance app_<id> [--key ed25519|ecdsa-p256] [--ca-dir DIR] [--out DIR]")
		return errUsage
	}
	switch args[0] {
	case "init-ca":
		fs := flag.NewFlagSet("tollgate fleet init-ca", flag.ContinueOnError)
		fs.SetOutput(stderr)
		dir := fs.String("dir", ".", "directory to write "+fleet.CACertFile+" and "+fleet.CAKeyFile+" to")
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		if _, err := fleet.InitCA(*dir); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "fleet CA written: %s (distribute) and %s (keep secret)\n",
			filepath.Join(*dir, fleet.CACertFile), filepath.Join(*dir, fleet.CAKeyFile))
		return nil
	case "issue":
		fs := flag.NewFlagSet("tollgate fleet issue", flag.ContinueOnError)
		fs.SetOutput(stderr)
		caDir := fs.String("ca-dir", ".", "directory holding the fleet CA")
		out := fs.String("out", ".", "directory to write "+fleet.ApplianceCertFile+" and "+fleet.ApplianceKeyFile+" to")
		id := fs.String("appliance", "", "appliance id, app_<id>")
		keyKind := fs.String("key", string(fleet.DefaultKeyKind), "appliance key: "+string(fleet.Ed25519)+" or "+string(fleet.ECDSAP256))
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		if *id == "" {
			return flagsErr("--appliance is required")
		}
		kind, err := fleet.ParseKeyKind(*keyKind)
		if err != nil {
			return flagsErr("--key: %v", err)
		}
		ca, err := fleet.LoadCA(filepath.Join(*caDir, fleet.CACertFile), filepath.Join(*caDir, fleet.CAKeyFile))
		if err != nil {
			return err
		}
		certPEM, keyPEM, err := fleet.IssueApplianceKind(ca, *id, kind)
		if err != nil {
			return err
		}
		if err := fleet.SaveAppliance(*out, certPEM, keyPEM); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "appliance certificate for %s (%s key) written to %s\n", *id, kind, *out)
		return nil
	}
	fmt.Fprintf(stderr, "tollgate fleet: unknown subcommand %q\n", args[0])
	return errUsage
}
