package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/tollgate-dev/tollgate/appliance"
	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/central/auth"
	"github.com/tollgate-dev/tollgate/server/responsestore"
)

// runGateway serves an appliance against an external etcd cluster. Keys are
// managed through KeysService; seeds are a development tool and refused.
func runGateway(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tollgate gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var common commonFlags
	common.register(fs)
	var app applianceFlags
	app.register(fs)
	var portalF portalFlags
	portalF.register(fs, "")
	data := fs.String("data", "", "directory of the appliance's audit log (required)")
	certFile := fs.String("appliance-cert", "", "appliance certificate `FILE`, from 'tollgate fleet issue' (default DATA/"+fleet.ApplianceCertFile+")")
	keyFile := fs.String("appliance-key", "", "its private key `FILE` (default DATA/"+fleet.ApplianceKeyFile+")")
	seedPath := fs.String("seed", "", "refused: seeds are accepted by 'tollgate dev' only")
	tokensFile := fs.String("audit-tokens", "", "YAML `FILE` mapping tenant ids to their audit tokens (tenant: [tga_...]), as 'tollgate central' reads it: "+
		"AuditService answers a tenant's requests to its tokens only (none without it)")
	var toCentral centralFlags
	toCentral.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *seedPath != "":
		return flagsErr("--seed is accepted by `tollgate dev` only; create keys in the portal (--portal-addr) or through KeysService")
	case len(common.etcd.list()) == 0:
		return flagsErr("--etcd-endpoints is required")
	case *data == "":
		return flagsErr("--data is required")
	case app.policyPath == "":
		return flagsErr("--policy is required")
	}
	if err := toCentral.check(); err != nil {
		return err
	}
	logger, err := newLogger(stderr, common.logLevel)
	if err != nil {
		return err
	}
	etcdTLS, gatewayTLS, err := common.connections(&portalF, logger)
	if err != nil {
		return err
	}
	tokens := auth.NewTokens()
	if *tokensFile != "" {
		if tokens, err = auth.LoadFile(*tokensFile); err != nil {
			return fmt.Errorf("--audit-tokens: %w", err)
		}
	}
	lock, err := lockDataDir(*data)
	if err != nil {
		return err
	}
	defer lock.Close()
	if *certFile == "" {
		*certFile = filepath.Join(*data, fleet.ApplianceCertFile)
	}
	if *keyFile == "" {
		*keyFile = filepath.Join(*data, fleet.ApplianceKeyFile)
	}
	signer, err := fleet.LoadAppliance(*certFile, *keyFile)
	if err != nil {
		return err
	}
	pol, policyPath, err := app.loadPolicy(ctx, "", logger)
	if err != nil {
		return err
	}
	audit, err := app.openAudit(*data, signer, logger)
	if err != nil {
		return err
	}
	defer audit.Close()
	defer serveExport(ctx, *data, audit, logger)()
	cli, err := dialEtcd(common.etcd.list(), etcdTLS)
	if err != nil {
		return err
	}
	defer cli.Close()
	fwd, err := toCentral.start(ctx, *data, signer, audit, app.headInterval, logger)
	if err != nil {
		return err
	}
	defer fwd.Stop()
	var collectors []prometheus.Collector
	if fwd != nil {
		collectors = append(collectors, fwd.Metrics())
	}
	cfg := common.applianceConfig(&app)
	cfg.GatewayTLS = gatewayTLS
	cfg.Etcd = cli
	cfg.Collectors = collectors
	if err := app.engines.apply(ctx, logger, &cfg); err != nil {
		return err
	}
	if err := portalF.apply(&cfg, logger); err != nil {
		return err
	}
	cfg.Logger = logger
	cfg.ApplianceID = signer.ID
	cfg.Policy = pol
	cfg.PolicyPath = policyPath
	cfg.Audit = audit
	cfg.ResponsesPath = filepath.Join(*data, responsestore.FileName)
	cfg.AuditTokens = tokens
	cfg.OnReady = func(a appliance.Addrs) {
		to := "none (heads stay on the appliance; see --central-ingest)"
		if fwd != nil {
			to = toCentral.ingest + " (queue: " + filepath.Join(*data, forwardQueueFile) + ")"
		}
		fmt.Fprintf(stdout, "Tollgate gateway is up.\n  Base URL:  %s\n  gRPC:      %s\n  Appliance: %s\n  Central:   %s\n",
			common.baseURL(a.Gateway), common.grpc.banner(a.GRPC), signer.ID, to)
		printMetricsAddr(stdout, a)
		if a.Portal != "" {
			fmt.Fprintf(stdout, "  Portal:    %s\n", portalF.portalURL(a))
		}
	}
	return appliance.Run(ctx, cfg)
}

func zapNop() *zap.Logger { return zap.NewNop() }
