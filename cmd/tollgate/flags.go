package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/tollgate-dev/tollgate/appliance"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/internal/certfile"
	"github.com/tollgate-dev/tollgate/internal/dirlock"
)

// commonFlags are the flags every serving command accepts.
type commonFlags struct {
	gatewayAddr          string
	grpcAddr             string
	etcd                 etcdFlags
	logLevel             string
	maxBodyBytes         int64
	maxInFlight          int64
	maxBodyBytesInFlight int64
	bodyTimeout          time.Duration
	writeStall           time.Duration
	metricsAddr          string
	otlpEndpoint         string
	otlpInsecure         bool
	shutdownGrace        time.Duration
	// gatewayCert and gatewayKey serve the gateway over TLS.
	gatewayCert, gatewayKey string
	grpc                    grpcFlags
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.gatewayAddr, "gateway-addr", "127.0.0.1:8080", "OpenAI-compatible HTTP listen address")
	fs.StringVar(&c.gatewayCert, "gateway-tls-cert", "", "PEM certificate `FILE` (chain) to serve the gateway over HTTPS (HTTP/1.1), with --gateway-tls-key")
	fs.StringVar(&c.gatewayKey, "gateway-tls-key", "", "PEM private key `FILE` of --gateway-tls-cert")
	fs.StringVar(&c.grpcAddr, "grpc-addr", "127.0.0.1:9090", "gRPC listen address; a non-loopback one needs --grpc-tls-cert (or --grpc-insecure)")
	c.grpc.register(fs)
	c.etcd.register(fs, "comma-separated etcd client URLs, https:// for a cluster serving TLS (dev: empty runs an embedded etcd)")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	c.maxBodyBytes = 8 << 20
	fs.Var(positiveInt{&c.maxBodyBytes}, "max-body-bytes", "largest accepted request body, in `bytes` (above 0)")
	c.maxInFlight = edge.DefaultMaxInFlight
	fs.Var(positiveInt{&c.maxInFlight}, "max-in-flight", "most requests served at once, streams included; one more is 503 with Retry-After (above 0)")
	c.maxBodyBytesInFlight = edge.DefaultMaxBodyBytesInFlight
	fs.Var(positiveInt{&c.maxBodyBytesInFlight}, "max-body-bytes-in-flight", "most `bytes` of request bodies held at once, across requests; "+
		"a request whose body does not fit is 503 with Retry-After before its body is read (above 0; raised to --max-body-bytes if below)")
	c.bodyTimeout = edge.DefaultBodyReadTimeout
	fs.Var(durationFlag{p: &c.bodyTimeout}, "body-read-timeout", "time a client has to send its request body, after its headers (408 past it); a `duration` above 0")
	c.writeStall = edge.DefaultWriteStallTimeout
	fs.Var(durationFlag{p: &c.writeStall}, "write-stall-timeout", "time a client may leave a part of its response untaken (a stream's event, 64 KiB of a body) "+
		"before its request is ended as gone; a `duration` above 0")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics (empty: off)")
	fs.StringVar(&c.otlpEndpoint, "otlp-endpoint", "", "export every request's trace to the OTLP/gRPC collector at `HOST:PORT` (empty: no tracing)")
	fs.BoolVar(&c.otlpInsecure, "otlp-insecure", false, "export traces to --otlp-endpoint without TLS")
	c.shutdownGrace = appliance.DefaultShutdownGrace
	fs.Var(durationFlag{p: &c.shutdownGrace, zero: true}, "shutdown-grace", "after SIGINT or SIGTERM, how long in-flight requests may take to finish before they are ended "+
		"with 503 (a started stream: one error event); a `duration`, 0 ends them at once. A second signal kills the process")
}

// applianceConfig is the part of an appliance's configuration that the
// serving flags set, the same for dev and gateway; the caller adds the
// etcd client, the logger, the policy, the audit log and the rest.
func (c *commonFlags) applianceConfig(app *applianceFlags) appliance.Config {
	cfg := appliance.Config{
		GatewayAddr:          c.gatewayAddr,
		GRPCAddr:             c.grpcAddr,
		MaxBodyBytes:         c.maxBodyBytes,
		MaxInFlight:          int(c.maxInFlight),
		MaxBodyBytesInFlight: c.maxBodyBytesInFlight,
		BodyReadTimeout:      c.bodyTimeout,
		WriteStallTimeout:    c.writeStall,
		MetricsAddr:          c.metricsAddr,
		OTLPEndpoint:         c.otlpEndpoint,
		OTLPInsecure:         c.otlpInsecure,
		HeadInterval:         app.headInterval,
		ShutdownGrace:        configGrace(c.shutdownGrace),
	}
	c.grpc.apply(&cfg)
	return cfg
}

// connections checks the flags of the connections dev and gateway make
// and serve, before anything is started: etcd's TLS (nil without), the
// gateway's (nil: plain HTTP), the gRPC listener's (kept for
// applianceConfig) and the portal's address and certificate.
func (c *commonFlags) connections(portalF *portalFlags, logger *slog.Logger) (etcdTLS, gatewayTLS *tls.Config, err error) {
	if etcdTLS, err = c.etcd.tlsConfig(); err != nil {
		return nil, nil, err
	}
	if gatewayTLS, err = c.gatewayTLS(logger); err != nil {
		return nil, nil, err
	}
	if err := c.grpc.check(c.grpcAddr, logger); err != nil {
		return nil, nil, err
	}
	if err := portalF.check(); err != nil {
		return nil, nil, err
	}
	return etcdTLS, gatewayTLS, nil
}

// gatewayTLS loads --gateway-tls-cert and --gateway-tls-key; nil without
// them (plain HTTP). A renewed pair is served from the next handshake on.
func (c *commonFlags) gatewayTLS(logger *slog.Logger) (*tls.Config, error) {
	if (c.gatewayCert == "") != (c.gatewayKey == "") {
		return nil, flagsErr("--gateway-tls-cert and --gateway-tls-key go together")
	}
	if c.gatewayCert == "" {
		return nil, nil
	}
	return servedTLS("gateway", c.gatewayCert, c.gatewayKey, logger)
}

// servedTLS is the server TLS configuration of a listener serving the
// certificate and key in certFile and keyFile, read again when they
// change (certfile.Pair); a renewed pair that cannot be loaded yet is
// logged, and the previous one served.
func servedTLS(listener, certFile, keyFile string, logger *slog.Logger) (*tls.Config, error) {
	pair, err := certfile.Load(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--%s-tls-cert, --%s-tls-key: %w", listener, listener, err)
	}
	pair.OnError = func(err error) {
		logger.Warn("renewed TLS certificate not loaded", slog.String("listener", listener), slog.Any("err", err))
	}
	return pair.Config(), nil
}

// baseURL is the gateway's OpenAI base URL at addr, as the banner shows
// it: https when it serves TLS.
func (c *commonFlags) baseURL(addr string) string {
	if c.gatewayCert != "" {
		return "https://" + addr + "/v1"
	}
	return "http://" + addr + "/v1"
}

// configGrace turns a --shutdown-grace value into a Config's ShutdownGrace
// (appliance and central alike), where 0 means the default and a negative
// value none.
func configGrace(flag time.Duration) time.Duration {
	if flag == 0 {
		return -1
	}
	return flag
}

// durationFlag is a duration flag that refuses negative values, and 0
// unless zero: a duration of 0 or less would otherwise be taken silently
// for something else.
type durationFlag struct {
	p    *time.Duration
	zero bool
}

func (d durationFlag) String() string {
	if d.p == nil {
		return "0s"
	}
	return d.p.String()
}

func (d durationFlag) Set(s string) error {
	v, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return errors.New("not a duration, such as 500ms, 30s or 2m")
	case v < 0 || v == 0 && !d.zero:
		if d.zero {
			return errors.New("must be 0 or more")
		}
		return errors.New("must be above 0")
	}
	*d.p = v
	return nil
}

// positiveInt is an integer flag that refuses 0 and negative values.
type positiveInt struct{ p *int64 }

func (n positiveInt) String() string {
	if n.p == nil {
		return "0"
	}
	return strconv.FormatInt(*n.p, 10)
}

func (n positiveInt) Set(s string) error {
	v, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil:
		return errors.New("not a whole number")
	case v <= 0:
		return errors.New("must be above 0")
	}
	*n.p = v
	return nil
}

// lockDataDir creates a serving command's --data directory if missing and
// locks it for the life of the process (internal/dirlock): a second
// process on the same directory fails at once.
func lockDataDir(dir string) (*dirlock.Lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	return dirlock.Acquire(dir)
}

// printMetricsAddr adds the metrics URL to an "is up" banner when
// --metrics-addr is set: the bound address, so ":0" shows its port.
func printMetricsAddr(w io.Writer, a appliance.Addrs) {
	if a.Metrics != "" {
		fmt.Fprintf(w, "  Metrics:   http://%s/metrics\n", a.Metrics)
	}
}
