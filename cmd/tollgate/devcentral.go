package main

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/central"
	"github.com/tollgate-dev/tollgate/central/auth"
	"github.com/tollgate-dev/tollgate/central/store/boltstore"
	"github.com/tollgate-dev/tollgate/central/tlsconf"
	"github.com/tollgate-dev/tollgate/internal/durable"
	"github.com/tollgate-dev/tollgate/internal/seed"
)

// devCentralAddrFlag registers `tollgate dev --central-addr`.
func devCentralAddrFlag(fs *flag.FlagSet) *string {
	return fs.String("central-addr", "127.0.0.1:8090", "REST address of the in-process central plane the appliance publishes heads to (empty: none)")
}

// devCentralConfig is what `tollgate dev` hands to its central plane.
type devCentralConfig struct {
	Data     string
	RESTAddr string
	// App and FleetCA are the dev appliance's certificate and the fleet CA
	// (fleet.EnsureDev).
	App     *fleet.Appliance
	FleetCA *x509.Certificate
	Audit   *auditlog.Log
	// Tokens are the audit tokens (devAuditTokens); Token is tenant demo's
	// (no seed), or "".
	Tokens       *auth.Tokens
	Token        string
	HeadInterval time.Duration
	// UploadTimeout is the forwarder's (--central-upload-timeout).
	UploadTimeout time.Duration
	// ShutdownGrace is the central plane's (central.Config).
	ShutdownGrace time.Duration
	Logger        *slog.Logger
}

// devCentral is the central plane `tollgate dev` runs in-process, with the
// appliance's forwarder publishing its heads to it over mTLS.
type devCentral struct {
	// failed says why the central plane did not start (dev goes on).
	failed error
	addrs  central.Addrs
	// token reads tenant demo's audit API (no seed), or "".
	token string
	data  string
	// applianceID is the dev appliance's, for the proof example.
	applianceID string
	stop        context.CancelFunc
	done        chan error // the central plane's Run, once started
	log         *slog.Logger
	st          *boltstore.Store
	fwd         *runningForwarder
	// metrics are the plane's, served on the appliance's /metrics.
	metrics collected
}

// startDevCentral starts the central plane (store in DATA/central) and the
// forwarder (queue in DATA/central-forward.db). With RESTAddr empty it does
// nothing and returns nil. When the central plane cannot listen (the
// address is taken), dev goes on without it and says so in its banner.
func startDevCentral(ctx context.Context, cfg devCentralConfig) (*devCentral, error) {
	if cfg.RESTAddr == "" {
		return nil, nil
	}
	d, err := newDevCentral(ctx, cfg)
	var busy *net.OpError
	if errors.As(err, &busy) && busy.Op == "listen" {
		cfg.Logger.Warn("central plane not started; heads stay on the appliance", "err", err)
		return &devCentral{failed: err}, nil
	}
	return d, err
}

func newDevCentral(ctx context.Context, cfg devCentralConfig) (*devCentral, error) {
	d := &devCentral{data: cfg.Data, log: cfg.Logger}
	ok := false
	defer func() {
		if !ok {
			d.shutdown()
		}
	}()
	tokens := cfg.Tokens
	d.token = cfg.Token
	caCert, app := cfg.FleetCA, cfg.App
	d.applianceID = app.ID
	st, err := boltstore.Open(filepath.Join(cfg.Data, "central", centralDBFile))
	if err != nil {
		return nil, err
	}
	d.st = st
	cert, certPEM, err := tlsconf.SelfSigned("127.0.0.1")
	if err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	d.stop = stop
	ready := make(chan central.Addrs, 1)
	centralDone := make(chan error, 1)
	go func() {
		centralDone <- central.Run(runCtx, central.Config{
			Store: st, Tokens: tokens, FleetCA: caCert, IngestCert: cert,
			RESTAddr: cfg.RESTAddr, GRPCAddr: "127.0.0.1:0", IngestAddr: "127.0.0.1:0",
			Logger:        cfg.Logger.With(slog.String("component", "central")),
			ShutdownGrace: cfg.ShutdownGrace,
			Registerer:    &d.metrics,
			OnReady:       func(a central.Addrs) { ready <- a },
		})
	}()
	select {
	case d.addrs = <-ready:
		d.done = centralDone
	case err := <-centralDone:
		return nil, fmt.Errorf("central plane: %w", err)
	}
	if err := d.startForwarder(runCtx, cfg, app, certPEM); err != nil {
		return nil, err
	}
	ok = true
	return d, nil
}

// startForwarder publishes the audit log's heads to the central plane
// over mTLS, as a separate appliance would.
func (d *devCentral) startForwarder(ctx context.Context, cfg devCentralConfig, app *fleet.Appliance, serverPEM []byte) error {
	roots, err := tlsconf.Pool(serverPEM)
	if err != nil {
		return err
	}
	fwd, err := startForwarder(ctx, forwarderConfig{
		Data: cfg.Data, IngestAddr: d.addrs.Ingest, ServerName: "127.0.0.1", Roots: roots, App: app, Audit: cfg.Audit,
		HeadInterval: cfg.HeadInterval, UploadTimeout: cfg.UploadTimeout, Logger: cfg.Logger,
	})
	if err != nil {
		return err
	}
	d.fwd = fwd
	return nil
}

// collectors are the Prometheus collectors of the dev central plane: the
// forwarder's backlog.
func (d *devCentral) collectors() []prometheus.Collector {
	if d == nil || d.fwd == nil {
		return nil
	}
	return append([]prometheus.Collector{d.fwd.Metrics()}, d.metrics.list()...)
}

// collected is a prometheus.Registerer that keeps what is registered with
// it: the in-process plane's metrics, which dev serves on the appliance's
// /metrics beside its own.
type collected struct {
	mu sync.Mutex
	cs []prometheus.Collector
}

func (c *collected) Register(x prometheus.Collector) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cs = append(c.cs, x)
	return nil
}

func (c *collected) MustRegister(xs ...prometheus.Collector) {
	for _, x := range xs {
		_ = c.Register(x)
	}
}

func (c *collected) Unregister(prometheus.Collector) bool { return false }

func (c *collected) list() []prometheus.Collector {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.cs)
}

// devAuditTokens are the seed's audit tokens or, without a seed, a demo
// token for tenant demo, made on first start and kept in the data
// directory (development only), with the demo token ("" with a seed).
func devAuditTokens(ctx context.Context, data string, sd *seed.Seed) (*auth.Tokens, string, error) {
	tokens := auth.NewTokens()
	if sd != nil {
		if err := sd.ApplyAuditTokens(ctx, tokens); err != nil {
			return nil, "", fmt.Errorf("audit tokens: %w", err)
		}
		return tokens, "", nil
	}
	file := filepath.Join(data, "central", "demo-audit-token")
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		b = []byte(auth.TokenPrefix + "dev_" + strings.ToLower(rand.Text()))
		if err = os.MkdirAll(filepath.Dir(file), 0o700); err == nil {
			err = durable.Replace(file, append(b, '\n'), 0o600)
		}
	}
	if err != nil {
		return nil, "", fmt.Errorf("demo audit token: %w", err)
	}
	token := strings.TrimSpace(string(b))
	return tokens, token, tokens.SetAuditTokens(ctx, demoTenant, []string{token})
}

// banner prints where the audit API is, after the dev banner, with the
// commands that fetch and verify the demo tenant's heads and proofs.
func (d *devCentral) banner(w io.Writer, headInterval time.Duration) {
	if d == nil {
		return
	}
	if d.failed != nil {
		fmt.Fprintf(w, "\n  Audit API: not started (%v); choose another --central-addr\n", d.failed)
		return
	}
	base := "http://" + d.addrs.REST + "/v1"
	fmt.Fprintf(w, "\n  Audit API: %s/tenants/{tenant_id}/audit/heads?day=YYYY-MM-DD (central plane; heads signed every %s, then published)\n",
		base, headInterval)
	if d.token == "" {
		fmt.Fprintf(w, "             tokens: the seed's audit_tokens\n")
		return
	}
	bin, ca := os.Args[0], filepath.Join(d.data, fleet.CACertFile)
	auth := "-H 'Authorization: Bearer " + d.token + "'"
	fmt.Fprintf(w, "  Heads:     curl -s %s \"%s/tenants/%s/audit/heads?day=$(date -u +%%F)\" > heads.json\n"+
		"             %s verify head heads.json --ca %s\n", auth, base, demoTenant, bin, ca)
	fmt.Fprintf(w, "  Proof:     curl -s %s \"%s/tenants/%s/audit/proof?appliance_id=%s&day=$(date -u +%%F)&request_id=REQ\" > proof.json\n"+
		"             %s verify proof proof.json --ca %s\n"+
		"             (REQ: the X-Request-Id header of a gateway response)\n", auth, base, demoTenant, d.applianceID, bin, ca)
}

// shutdown stops the forwarder and the central plane and closes their files.
func (d *devCentral) shutdown() {
	if d == nil {
		return
	}
	d.fwd.Stop()
	if d.stop != nil {
		d.stop()
	}
	if d.done != nil {
		// Run returns nil when stopped; an error is a server that died.
		if err := <-d.done; err != nil {
			d.log.Error("central plane stopped with an error", "err", err)
		}
	}
	if d.st != nil {
		_ = d.st.Close()
	}
}
