package main

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/appliance"
	"github.com/tollgate-dev/tollgate/audit/fleet"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/internal/etcdembed"
	"github.com/tollgate-dev/tollgate/internal/seed"
	"github.com/tollgate-dev/tollgate/portal"
	"github.com/tollgate-dev/tollgate/server/keys"
	"github.com/tollgate-dev/tollgate/server/policy"
	"github.com/tollgate-dev/tollgate/server/responsestore"
)

// runDev starts everything in one process: an embedded etcd (unless
// --etcd-endpoints names a cluster), the internal gRPC services and the
// HTTP edge, with state kept in --data across restarts.
func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tollgate dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var common commonFlags
	common.register(fs)
	var app applianceFlags
	app.register(fs)
	var portalF portalFlags
	portalF.register(fs, devPortalAddr)
	data := fs.String("data", ".tollgate-dev", "directory holding the development state")
	seedPath := fs.String("seed", "", "YAML file declaring tenants and keys (development only)")
	centralAddr := devCentralAddrFlag(fs)
	var uploadTimeout time.Duration
	uploadTimeoutFlag(fs, &uploadTimeout)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	logger, err := newLogger(stderr, common.logLevel)
	if err != nil {
		return err
	}
	// Parse the seed before starting anything, so a bad seed stops dev at
	// once with the line at fault.
	var sd *seed.Seed
	if *seedPath != "" {
		if sd, err = seed.Load(*seedPath); err != nil {
			return err
		}
	}
	etcdTLS, gatewayTLS, err := common.connections(&portalF, logger)
	if err != nil {
		return err
	}
	lock, err := lockDataDir(*data)
	if err != nil {
		return err
	}
	defer lock.Close()

	endpoints := common.etcd.list()
	if len(endpoints) == 0 {
		srv, err := etcdembed.Start(ctx, filepath.Join(*data, "etcd"), logger.With(slog.String("component", "etcd")))
		if err != nil {
			return err
		}
		defer srv.Close()
		endpoints = srv.Endpoints()
	}
	cli, err := dialEtcd(endpoints, etcdTLS)
	if err != nil {
		return err
	}
	defer cli.Close()

	deps, err := openDevAppliance(ctx, *data, &app, logger)
	if err != nil {
		return err
	}
	defer deps.close()
	defer serveExport(ctx, *data, deps.audit, logger)()

	store := keys.NewStore(cli, time.Now)
	if sd != nil {
		if err := sd.Apply(ctx, store); err != nil {
			return fmt.Errorf("apply seed %s: %w", *seedPath, err)
		}
		logger.Info("seed applied", slog.String("file", *seedPath))
	}
	// The audit tokens read a tenant's audit trail at the central plane
	// and over AuditService alike.
	tokens, demoToken, err := devAuditTokens(ctx, *data, sd)
	if err != nil {
		return err
	}
	dc, err := startDevCentral(ctx, devCentralConfig{Data: *data, RESTAddr: *centralAddr, App: deps.app, FleetCA: deps.fleetCA, Audit: deps.audit, Tokens: tokens, Token: demoToken, HeadInterval: app.headInterval, UploadTimeout: uploadTimeout, ShutdownGrace: configGrace(common.shutdownGrace), Logger: logger})
	if err != nil {
		return err
	}
	defer dc.shutdown()

	// The demo key is minted before the appliance starts, so that its key
	// cache has loaded it by the time the banner shows the secret (a
	// client as quick as a script would otherwise meet a 401).
	var demoKey func(w io.Writer, baseURL string)
	var demoAdmin func(w io.Writer)
	if sd == nil {
		if demoKey, err = prepareDemoKey(ctx, store, *data); err != nil {
			return fmt.Errorf("demo key: %w", err)
		}
		if portalF.addr != "" {
			if demoAdmin, err = prepareDemoAdmin(ctx, portal.NewAdmins(cli, nil), *data); err != nil {
				return fmt.Errorf("demo administrator: %w", err)
			}
		}
	}
	shown := false
	cfg := common.applianceConfig(&app)
	cfg.GatewayTLS = gatewayTLS
	cfg.Etcd = cli
	cfg.Collectors = dc.collectors()
	if err := app.engines.apply(ctx, logger, &cfg); err != nil {
		return err
	}
	if err := portalF.apply(&cfg, logger); err != nil {
		return err
	}
	cfg.Logger = logger
	cfg.ApplianceID = deps.applianceID
	cfg.Policy = deps.policy
	cfg.PolicyPath = deps.policyPath
	cfg.Audit = deps.audit
	cfg.ResponsesPath = filepath.Join(*data, responsestore.FileName)
	cfg.AuditTokens = tokens
	cfg.OnReady = func(a appliance.Addrs) {
		fmt.Fprintf(stdout, "Tollgate dev is up.\n  Base URL:  %s\n  gRPC:      %s\n  Appliance: %s (fleet CA: %s)\n  Policy:    %s\n  Data:      %s\n",
			common.baseURL(a.Gateway), common.grpc.banner(a.GRPC), deps.applianceID, filepath.Join(*data, fleet.CACertFile), deps.policyPath, *data)
		printMetricsAddr(stdout, a)
		if a.Portal != "" {
			fmt.Fprintf(stdout, "  Portal:    %s\n", portalF.portalURL(a))
			if demoAdmin != nil {
				demoAdmin(stdout)
			} else {
				fmt.Fprintf(stdout, "             add an administrator: tollgate portal add-admin --etcd-endpoints %s%s --tenant TENANT --user USER\n",
					strings.Join(endpoints, ","), common.etcd.tlsArgs())
			}
		}
		if demoKey != nil {
			demoKey(stdout, common.baseURL(a.Gateway))
			shown = true
		}
		dc.banner(stdout, app.headInterval)
	}
	err = appliance.Run(ctx, cfg)
	if err != nil && demoKey != nil && !shown {
		// Its secret is shown once: now, though dev did not come up.
		fmt.Fprintf(stdout, "Tollgate dev did not start; this data directory's demo key:\n")
		demoKey(stdout, common.baseURL(common.gatewayAddr))
	}
	return err
}

// devAppliance is what dev opens in its data directory besides etcd.
type devAppliance struct {
	applianceID string
	app         *fleet.Appliance
	fleetCA     *x509.Certificate
	policy      *policy.Engine
	policyPath  string
	audit       *auditlog.Log
}

// openDevAppliance gives the dev appliance its fleet PKI (created on first
// start, fleet-ca.pem in the data directory), its policy bundle and its
// audit log.
func openDevAppliance(ctx context.Context, data string, app *applianceFlags, logger *slog.Logger) (*devAppliance, error) {
	id, err := devApplianceID(data)
	if err != nil {
		return nil, fmt.Errorf("appliance id: %w", err)
	}
	signer, caCert, err := fleet.EnsureDev(data, id)
	if err != nil {
		return nil, err
	}
	d := &devAppliance{applianceID: id, app: signer, fleetCA: caCert}
	if d.policy, d.policyPath, err = app.loadPolicy(ctx, data, logger); err != nil {
		return nil, err
	}
	if d.audit, err = app.openAudit(data, signer, logger); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *devAppliance) close() {
	if d.audit != nil {
		_ = d.audit.Close()
	}
}

const (
	demoTenant = "demo"
	demoLabel  = "demo"
	demoAdmin  = "admin"
	// devPortalAddr is where dev serves the operator portal by default.
	devPortalAddr = "127.0.0.1:8081"
)

// prepareDemoAdmin adds the demo tenant's portal administrator on the
// first start of a data directory, with a generated password, and returns
// what prints it, once. Later starts print when it was shown instead.
func prepareDemoAdmin(ctx context.Context, admins *portal.Admins, data string) (func(w io.Writer), error) {
	exists, err := admins.Exists(ctx, demoTenant, demoAdmin)
	if err != nil {
		return nil, err
	}
	if exists {
		return func(w io.Writer) {
			fmt.Fprintf(w, "             sign in as %s of tenant %s: its password was shown once when %s was first started\n", demoAdmin, demoTenant, data)
		}, nil
	}
	password := newPassword()
	if err := admins.Create(ctx, demoTenant, demoAdmin, password); err != nil {
		return nil, err
	}
	return func(w io.Writer) {
		fmt.Fprintf(w, "             tenant %s, user %s, password %s  (shown this once)\n", demoTenant, demoAdmin, password)
	}, nil
}

// prepareDemoKey mints the demo key on the first start of a data directory
// and returns what prints its secret, once. Later starts print when it was
// shown instead of minting another.
func prepareDemoKey(ctx context.Context, store *keys.Store, data string) (func(w io.Writer, baseURL string), error) {
	existing, err := store.FindByLabel(ctx, demoTenant, demoLabel)
	switch {
	case err == nil:
		return func(w io.Writer, _ string) {
			fmt.Fprintf(w, "  Demo key:  %s (%s…, tenant %s) was shown once when %s was first started, at %s.\n"+
				"             Secrets are not stored; to get a new one remove %s or use --seed.\n",
				existing.GetKeyId(), existing.GetSecretHint(), demoTenant, data,
				existing.GetCreateTime().AsTime().UTC().Format(time.RFC3339), data)
		}, nil
	case !errors.Is(err, keys.ErrNotFound):
		return nil, err
	}
	key, secret, err := store.Create(ctx, keys.Spec{
		TenantID:  demoTenant,
		Label:     demoLabel,
		AllModels: true,
		RPM:       600,
		TPD:       1_000_000,
		Scopes:    []string{"tool:*"},
	})
	if err != nil {
		return nil, err
	}
	return func(w io.Writer, baseURL string) {
		fmt.Fprintf(w, "  Demo key:  %s  (%s, tenant %s; shown this once)\n\n"+
			"Try it:\n  curl -s %s/chat/completions -H 'Authorization: Bearer %s' \\\n"+
			"    -H 'Content-Type: application/json' -d '{\"model\":\"builtin/echo\",\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}]}'\n",
			secret, key.GetKeyId(), demoTenant, baseURL, secret)
	}, nil
}
