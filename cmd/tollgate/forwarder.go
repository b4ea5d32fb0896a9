package main

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/audit/forward"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/central/tlsconf"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
)

// forwardQueueFile is the forwarder's queue in the appliance's data
// directory.
const forwardQueueFile = "central-forward.db"

// centralFlags configure an appliance's publishing to a central plane.
type centralFlags struct {
	ingest        string
	caFile        string
	serverName    string
	uploadTimeout time.Duration
}

func (c *centralFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.ingest, "central-ingest", "", "HOST:PORT of the central plane's ingest (mTLS with the appliance certificate); empty: heads stay on the appliance")
	fs.StringVar(&c.caFile, "central-ca", "", "PEM of the certificate the central plane's ingest certificate chains to (a self-signed one: that certificate); required with --central-ingest")
	fs.StringVar(&c.serverName, "central-server-name", "", "name the central plane's ingest certificate holds (default: the host of --central-ingest)")
	uploadTimeoutFlag(fs, &c.uploadTimeout)
}

// uploadTimeoutFlag registers --central-upload-timeout, the forwarder's
// forwarderConfig.UploadTimeout, for gateway and dev alike.
func uploadTimeoutFlag(fs *flag.FlagSet, p *time.Duration) {
	*p = forward.DefaultUploadTimeout
	fs.Var(durationFlag{p: p}, "central-upload-timeout", "how long one upload of a head to the central plane may take until it is answered; "+
		"one that takes longer is abandoned and retried with backoff. A `duration` above 0, above the plane's --ingest-max-upload-time")
}

// forwarderConfig is what publishing heads to a central plane needs.
type forwarderConfig struct {
	Data         string // the queue goes in Data/central-forward.db
	IngestAddr   string
	ServerName   string
	Roots        *x509.CertPool
	App          *fleet.Appliance
	Audit        *auditlog.Log
	HeadInterval time.Duration
	// UploadTimeout bounds one upload (0: forward.DefaultUploadTimeout).
	UploadTimeout time.Duration
	Logger        *slog.Logger
	// Dialer, when set, opens the connection's sockets instead of gRPC's
	// own dialer: tests read the options of the socket it opened.
	Dialer func(ctx context.Context, addr string) (net.Conn, error)
}

// runningForwarder is a forwarder publishing in the background.
type runningForwarder struct {
	fwd *forward.Forwarder
	// conn is its connection to the central plane, and keepalive the
	// parameters conn was dialed with (forward.Keepalive), which tests
	// compare: gRPC turns zero parameters into pings every 10 s with the
	// same 20 s timeout, so the socket alone does not tell them apart.
	conn      *grpc.ClientConn
	keepalive keepalive.ClientParameters
	stop      context.CancelFunc
	done      chan error
	close     []func() error
	log       *slog.Logger
}

// forwardPollInterval is how often the forwarder looks for new heads: a
// quarter of the head interval, between 50ms and a second, so heads reach
// the central plane within a second of being signed.
func forwardPollInterval(headInterval time.Duration) time.Duration {
	return min(time.Second, max(headInterval/4, 50*time.Millisecond))
}

// forwarderDialOptions are those of the forwarder's connection to the
// central plane: mTLS with the appliance certificate, and gRPC keepalive
// with ka (forward.Keepalive, which finds a dead link within a minute and
// 20 s instead of the upload timeout), through cfg.Dialer when set.
func forwarderDialOptions(cfg forwarderConfig, ka keepalive.ClientParameters) []grpc.DialOption {
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(credentials.NewTLS(tlsconf.Appliance(cfg.App, cfg.Roots, cfg.ServerName))),
		grpc.WithKeepaliveParams(ka),
	}
	if cfg.Dialer != nil {
		opts = append(opts, grpc.WithContextDialer(cfg.Dialer))
	}
	return opts
}

// startForwarder opens the queue and publishes the audit log's heads to
// the central plane until Stop.
func startForwarder(ctx context.Context, cfg forwarderConfig) (*runningForwarder, error) {
	ka := forward.Keepalive
	conn, err := grpc.NewClient(cfg.IngestAddr, forwarderDialOptions(cfg, ka)...)
	if err != nil {
		return nil, fmt.Errorf("central plane %s: %w", cfg.IngestAddr, err)
	}
	log := cfg.Logger.With(slog.String("component", "central-forward"))
	fwd, err := forward.Open(forward.Options{
		Path: filepath.Join(cfg.Data, forwardQueueFile), Source: cfg.Audit,
		Client:            centralv1.NewCentralAuditServiceClient(conn),
		LeafRetentionDays: forward.RetentionDays(cfg.Audit.Retention()),
		PollInterval:      forwardPollInterval(cfg.HeadInterval),
		UploadTimeout:     cfg.UploadTimeout,
		Logger:            log,
	})
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	r := &runningForwarder{fwd: fwd, conn: conn, keepalive: ka, stop: stop, done: make(chan error, 1), close: []func() error{conn.Close, fwd.Close}, log: log}
	go func() { r.done <- fwd.Run(runCtx) }()
	return r, nil
}

// Metrics is the forwarder's backlog collector.
func (r *runningForwarder) Metrics() prometheus.Collector { return r.fwd.Metrics() }

// Stop ends the forwarder and closes its queue and connection.
func (r *runningForwarder) Stop() {
	if r == nil {
		return
	}
	r.stop()
	if err := <-r.done; err != nil && !errors.Is(err, context.Canceled) {
		r.log.Error("forwarder stopped with an error", "err", err)
	}
	for i := len(r.close) - 1; i >= 0; i-- {
		if err := r.close[i](); err != nil {
			r.log.Warn("closing the forwarder", "err", err)
		}
	}
}

// check refuses incomplete or malformed flags.
func (c *centralFlags) check() error {
	if c.ingest == "" {
		if c.caFile != "" || c.serverName != "" {
			return flagsErr("--central-ca and --central-server-name need --central-ingest")
		}
		return nil
	}
	if c.caFile == "" {
		return flagsErr("--central-ingest needs --central-ca")
	}
	if _, _, err := net.SplitHostPort(c.ingest); err != nil {
		return flagsErr("--central-ingest: %v", err)
	}
	return nil
}

// start publishes the audit log's heads to the central plane named by the
// flags, which check accepted (nil when --central-ingest is empty).
func (c *centralFlags) start(ctx context.Context, data string, app *fleet.Appliance, audit *auditlog.Log, headInterval time.Duration, logger *slog.Logger) (*runningForwarder, error) {
	if c.ingest == "" {
		return nil, nil
	}
	name := c.serverName
	if name == "" {
		name, _, _ = net.SplitHostPort(c.ingest)
	}
	pem, err := os.ReadFile(c.caFile)
	if err != nil {
		return nil, fmt.Errorf("--central-ca: %w", err)
	}
	roots, err := tlsconf.Pool(pem)
	if err != nil {
		return nil, fmt.Errorf("--central-ca %s: %w", c.caFile, err)
	}
	return startForwarder(ctx, forwarderConfig{
		Data: data, IngestAddr: c.ingest, ServerName: name, Roots: roots, App: app, Audit: audit,
		HeadInterval: headInterval, UploadTimeout: c.uploadTimeout, Logger: logger,
	})
}
