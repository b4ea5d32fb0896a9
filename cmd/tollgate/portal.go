package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/appliance"
	"github.com/tollgate-dev/tollgate/internal/netaddr"
	"github.com/tollgate-dev/tollgate/portal"
)

// portalFlags serve the operator portal.
type portalFlags struct {
	addr         string
	certFile     string
	keyFile      string
	publicOrigin string
	twoStep      bool
	signIns      int
}

// register adds the portal flags; def is the command's default address
// (empty: off).
func (p *portalFlags) register(fs *flag.FlagSet, def string) {
	fs.StringVar(&p.addr, "portal-addr", def, "serve the operator portal (tenant administrators manage their keys) at this address; empty: off. "+
		"Without --portal-tls-cert only a loopback address is accepted")
	fs.StringVar(&p.certFile, "portal-tls-cert", "", "PEM certificate `FILE` (chain) to serve the portal over HTTPS")
	fs.StringVar(&p.keyFile, "portal-tls-key", "", "PEM private key `FILE` of --portal-tls-cert")
	fs.StringVar(&p.publicOrigin, "portal-public-origin", "", "scheme://host[:port] browsers reach the portal at through a reverse proxy, e.g. https://portal.example.com: "+
		"forms must come from it, and https makes the session cookie Secure (empty: the portal's own address)")
	fs.BoolVar(&p.twoStep, "portal-require-two-step", false, "require two-step sign-in (codes from an authenticator app) of every portal administrator: "+
		"one without it can only set it up, and nobody can turn it off")
	fs.IntVar(&p.signIns, "portal-sign-ins-per-address", portal.DefaultSignInsPerAddress, "sign-ins (and password changes) one client address may start at once, and in a minute; "+
		"beyond, 429 (raise it when many administrators share one address, behind a NAT)")
}

// check refuses portal flags that do not go together: a certificate
// without its key, or an address off loopback without TLS (its pages
// carry passwords, session cookies and key secrets).
func (p *portalFlags) check() error {
	if (p.certFile == "") != (p.keyFile == "") {
		return flagsErr("--portal-tls-cert and --portal-tls-key go together")
	}
	if p.addr != "" && p.certFile == "" && !netaddr.IsLoopback(p.addr) {
		return flagsErr("--portal-addr %s: the portal serves it without TLS: give it a certificate (--portal-tls-cert), or a loopback address behind a TLS proxy", p.addr)
	}
	if p.signIns < 1 {
		return flagsErr("--portal-sign-ins-per-address %d: want 1 or more", p.signIns)
	}
	if p.publicOrigin != "" {
		if err := portal.CheckPublicOrigin(p.publicOrigin); err != nil {
			return flagsErr("--portal-public-origin: %v", err)
		}
	}
	return nil
}

// apply sets the portal's part of an appliance configuration.
func (p *portalFlags) apply(cfg *appliance.Config, logger *slog.Logger) error {
	if err := p.check(); err != nil {
		return err
	}
	cfg.PortalAddr = p.addr
	cfg.PortalRequireTwoStep = p.twoStep
	cfg.PortalPublicOrigin = p.publicOrigin
	cfg.PortalSignInsPerAddress = p.signIns
	if p.certFile == "" || p.addr == "" {
		return nil
	}
	tlsCfg, err := servedTLS("portal", p.certFile, p.keyFile, logger)
	if err != nil {
		return err
	}
	cfg.PortalTLS = tlsCfg
	return nil
}

// portalURL is the portal's address in a banner, with the public origin
// browsers use when it is behind a proxy.
func (p *portalFlags) portalURL(a appliance.Addrs) string {
	scheme := "http"
	if p.certFile != "" {
		scheme = "https"
	}
	u := scheme + "://" + a.Portal + "/"
	if p.publicOrigin != "" {
		u += " (browsers: " + strings.TrimSuffix(p.publicOrigin, "/") + "/)"
	}
	return u
}

// runPortal manages the portal's administrators: add-admin adds one,
// set-password resets one's password, reset-two-step turns one's two-step
// sign-in off (a lost phone), remove-admin removes one. The last three
// end the account's sessions.
func runPortal(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usageLine = "Usage: tollgate portal add-admin|set-password --etcd-endpoints URLS --tenant TENANT --user USER [--password-file FILE]\n" +
		"       tollgate portal reset-two-step|remove-admin --etcd-endpoints URLS --tenant TENANT --user USER\n" +
		"       tollgate portal list-admins --etcd-endpoints URLS [--tenant TENANT]"
	sub := ""
	if len(args) > 0 {
		sub = args[0]
	}
	switch sub {
	case "add-admin", "set-password", "reset-two-step", "remove-admin", "list-admins":
	default:
		if sub != "" {
			fmt.Fprintf(stderr, "tollgate portal: unknown subcommand %q\n", sub)
		}
		fmt.Fprintln(stderr, usageLine)
		return errUsage
	}
	fs := flag.NewFlagSet("tollgate portal "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var etcd etcdFlags
	etcd.register(fs, "comma-separated etcd client URLs of the appliance, https:// for a cluster serving TLS (required)")
	tenant := fs.String("tenant", "", "tenant the administrator manages (required; list-admins: empty lists every tenant's)")
	user := new(string)
	if sub != "list-admins" {
		user = fs.String("user", "", "the administrator's user name (required)")
	}
	var passwordFile *string
	if sub == "add-admin" || sub == "set-password" {
		passwordFile = fs.String("password-file", "", "`FILE` holding the password (- reads standard input); empty: a password is generated and printed once")
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	switch {
	case len(etcd.list()) == 0:
		return flagsErr("--etcd-endpoints is required")
	case sub != "list-admins" && (*tenant == "" || *user == ""):
		return flagsErr("--tenant and --user are required")
	}
	etcdTLS, err := etcd.tlsConfig()
	if err != nil {
		return err
	}
	var password string
	var generated bool
	if passwordFile != nil {
		if password, generated, err = readPassword(*passwordFile); err != nil {
			return err
		}
	}
	cli, err := dialEtcd(etcd.list(), etcdTLS)
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	admins := portal.NewAdmins(cli, nil)
	switch sub {
	case "list-admins":
		var list []portal.Admin
		if list, err = admins.List(ctx, *tenant); err == nil {
			for _, a := range list {
				twoStep := "two-step off"
				if a.TwoStep {
					twoStep = "two-step on"
				}
				fmt.Fprintf(stdout, "%s\t%s\tadded %s\t%s\n", a.Tenant, a.User, a.CreateTime.UTC().Format(time.RFC3339), twoStep)
			}
		}
	case "add-admin":
		err = admins.Create(ctx, *tenant, *user, password)
		if err == nil {
			fmt.Fprintf(stdout, "administrator %s of tenant %s added\n", *user, *tenant)
		}
	case "set-password":
		if _, err = admins.SetPassword(ctx, *tenant, *user, password, 0); err == nil {
			fmt.Fprintf(stdout, "password of %s of tenant %s set; their sessions have ended\n", *user, *tenant)
		}
	case "reset-two-step":
		if _, err = admins.SetTOTP(ctx, *tenant, *user, "", 0); err == nil {
			fmt.Fprintf(stdout, "two-step sign-in of %s of tenant %s is off; their sessions have ended\n", *user, *tenant)
		}
	case "remove-admin":
		if err = admins.Remove(ctx, *tenant, *user); err == nil {
			fmt.Fprintf(stdout, "administrator %s of tenant %s removed; their sessions have ended\n", *user, *tenant)
		}
	}
	if err != nil {
		return err
	}
	if generated {
		fmt.Fprintf(stdout, "password: %s (shown this once)\n", password)
	}
	return nil
}

// readPassword reads a password from file ("-": standard input), without
// its line ending; with no file it generates one.
func readPassword(file string) (password string, generated bool, err error) {
	if file == "" {
		return newPassword(), true, nil
	}
	var b []byte
	if file == "-" {
		b, err = io.ReadAll(io.LimitReader(os.Stdin, portal.MaxPasswordLen+2))
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return "", false, fmt.Errorf("--password-file: %w", err)
	}
	return strings.TrimRight(string(b), "\r\n"), false, nil
}

// newPassword is a generated password: 26 base32 characters (130 bits).
func newPassword() string { return strings.ToLower(rand.Text()) }
