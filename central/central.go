// Package central runs the central plane: it holds every appliance's
// signed heads (10 years) and the leaves needed for inclusion proofs, and
// serves the audit endpoints so that a tenant can verify its records
// without trusting any appliance. Three listeners:
//
//   - ingest: gRPC CentralAuditService over mTLS, appliances publish heads
//     with their fleet certificate (central/service, central/ingest);
//   - gRPC: AuditQueryService with audit tokens (central/auth);
//   - REST: grpc-gateway over a connection to the gRPC listener, and the
//     OpenAPI document (central/rest).
//
// docs/central.md describes the plane.
package central

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/tollgate-dev/tollgate/central/auth"
	"github.com/tollgate-dev/tollgate/central/ingest"
	"github.com/tollgate-dev/tollgate/central/rest"
	"github.com/tollgate-dev/tollgate/central/service"
	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/central/tlsconf"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
	"github.com/tollgate-dev/tollgate/internal/connlimit"
	"github.com/tollgate-dev/tollgate/internal/grpcserver"
	"github.com/tollgate-dev/tollgate/internal/lifecycle"
	"github.com/tollgate-dev/tollgate/internal/netaddr"
)

// DefaultPruneInterval is how often retention is applied.
const DefaultPruneInterval = time.Hour

// DefaultShutdownGrace is how long calls and requests in flight may take
// to finish once the plane is told to stop.
const DefaultShutdownGrace = 15 * time.Second

// MaxHeaderBytes bounds the request line and headers of a REST request;
// a larger one is answered 431.
const MaxHeaderBytes = 64 << 10

// DefaultRESTWriteTimeout bounds a REST request from the end of its
// headers to the end of its answer. The largest answer, a heads list of
// 64 MiB (MaxQueryResponse), takes some 2 minutes at 4.5 Mbit/s, a page
// of 1000 heads with the largest certificates (some 17 MiB) at 1.2
// Mbit/s; a client that reads more slowly has its connection closed,
// rather than holding the answer in the plane's memory for as long as it
// likes, and pages with a smaller page_size instead.
const DefaultRESTWriteTimeout = 2 * time.Minute

// maxQueryMessage bounds a gRPC query request (a few identifiers).
const maxQueryMessage = 64 << 10

// MaxQueryResponse bounds a query response on the gateway's connection to
// the gRPC listener, and the query service keeps its answers within it: an
// unpaged heads list holds one head per appliance (each up to some 17 KiB
// with its certificate), so gRPC's default of 4 MiB would fail at a few
// hundred appliances; past 64 MiB (some 3,900 heads with 16 KiB
// certificates) the service asks for page_size instead, and a page of at
// most 1000 heads always fits.
const MaxQueryResponse = 64 << 20

// Defaults of the ingest listener's limits (Config).
const (
	// DefaultIngestMaxStreams bounds the streams of one appliance's
	// connection: its forwarder sends one upload at a time.
	DefaultIngestMaxStreams = 4
	// DefaultIngestKeepalive is how long an ingest connection may be
	// silent before the plane pings it, and DefaultIngestKeepaliveTimeout
	// how long the ping may go unanswered before the connection is closed
	// and its uploads end, returning their budget.
	DefaultIngestKeepalive        = time.Minute
	DefaultIngestKeepaliveTimeout = 20 * time.Second
	// DefaultIngestMaxConnIdle is how long an ingest connection may carry
	// no upload before the plane closes it gracefully (GOAWAY), so that an
	// appliance that answers pings but no longer uploads does not hold a
	// connection slot for ever. An appliance uploads at every head
	// interval (a minute by default) and dials again when it next needs
	// to.
	DefaultIngestMaxConnIdle = 15 * time.Minute
	// DefaultIngestMaxConns bounds the ingest listener's open connections.
	// Each appliance keeps one (its forwarder's), so it is a fleet of
	// thousands; a connection beyond it is closed as soon as it is
	// accepted, and its appliance retries with backoff.
	DefaultIngestMaxConns = 4096
	// DefaultIngestMaxConnsPerHost bounds the ingest listener's open
	// connections from one IP address. Connections count before they
	// authenticate, so without it one host could hold every slot (each
	// for up to the handshake timeout, again and again) and keep the
	// fleet out; appliances behind one NAT address share it, so it
	// leaves room for a large site.
	DefaultIngestMaxConnsPerHost = 256
	// DefaultIngestHandshakeTimeout bounds a new ingest connection's TLS
	// handshake and HTTP/2 preface (gRPC's default is 120 s): a few KiB
	// each way and a few round trips, well under a second on a link of
	// 100 kbit/s, so that a client that connects and sends nothing gives
	// its connection slot back soon.
	DefaultIngestHandshakeTimeout = 10 * time.Second
	// ingestPingMinTime is the shortest interval at which an appliance may
	// ping the ingest listener (gRPC's default is 5 minutes). Our forwarder
	// pings a connection silent for a minute (centralclient.Keepalive); an
	// appliance that pings every 30 s or more, with or without an upload
	// in progress, keeps its connection.
	ingestPingMinTime = 30 * time.Second
)

// Config configures the plane.
type Config struct {
	Store  store.Store
	Tokens *auth.Tokens
	// FleetCA is the CA appliance certificates chain to.
	FleetCA *x509.Certificate
	// IngestCert is the ingest listener's server certificate.
	IngestCert tls.Certificate
	// Listen addresses; ":0" style addresses pick a free port (see OnReady).
	RESTAddr, GRPCAddr, IngestAddr string
	// RESTTLS serves the REST audit API over TLS (HTTP/1.1); without it,
	// plain HTTP for loopback or a TLS proxy in front: audit tokens are
	// bearer secrets.
	RESTTLS *tls.Config
	Logger  *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// PruneInterval is how often retention runs (0: DefaultPruneInterval).
	PruneInterval time.Duration
	// PruneTicks, when set, drives retention instead of a ticker of
	// PruneInterval: a pass at start, then one per value received (tests).
	PruneTicks <-chan time.Time
	// OnPrune, when set, is called after every retention pass.
	OnPrune func(store.Pruned, error)
	// MaxLeavesPerHead bounds one upload (0: service.DefaultMaxLeaves).
	MaxLeavesPerHead int
	// MaxForksPerTree bounds the forks whose evidence is kept per tree
	// (0: store.DefaultMaxForksPerTree).
	MaxForksPerTree int
	// IngestMaxUploads bounds the uploads in progress across the plane (0:
	// service.DefaultMaxUploads), IngestMaxPendingLeaves the leaves they
	// announce together (0: service.DefaultMaxPendingLeaves, and at least
	// MaxLeavesPerHead): the memory uploads hold. An upload beyond either is
	// refused with Unavailable, which an appliance retries.
	IngestMaxUploads, IngestMaxPendingLeaves int
	// IngestMaxUploadsPerAppliance bounds one appliance's uploads in
	// progress (0: service.DefaultMaxUploadsPerAppliance), so that one
	// appliance cannot hold every slot; refused beyond as above.
	IngestMaxUploadsPerAppliance int
	// IngestMaxStreams bounds the concurrent streams of one ingest
	// connection (0: DefaultIngestMaxStreams).
	IngestMaxStreams int
	// IngestKeepalive and IngestKeepaliveTimeout find dead appliances: a
	// connection silent for IngestKeepalive is pinged, and closed when the
	// ping is not answered within IngestKeepaliveTimeout (0:
	// DefaultIngestKeepalive, DefaultIngestKeepaliveTimeout; gRPC raises
	// either to at least a second).
	IngestKeepalive, IngestKeepaliveTimeout time.Duration
	// IngestMaxConnIdle closes a connection with no upload for that long
	// (0: DefaultIngestMaxConnIdle).
	IngestMaxConnIdle time.Duration
	// IngestMaxConns bounds the ingest listener's open connections (0:
	// DefaultIngestMaxConns): one more is accepted and closed at once, and
	// counted in the log. IngestHandshakeTimeout bounds a connection's TLS
	// handshake and HTTP/2 preface (0: DefaultIngestHandshakeTimeout), so
	// that one that never completes gives its slot back.
	IngestMaxConns         int
	IngestHandshakeTimeout time.Duration
	// IngestMaxConnsPerHost bounds the ingest listener's open connections
	// from one IP address (0: DefaultIngestMaxConnsPerHost): one more from
	// it is closed as soon as it is accepted, and counted in the log.
	IngestMaxConnsPerHost int
	// OnIngestConnClosed, when set, is called once a closed ingest
	// connection's slot is free again (tests).
	OnIngestConnClosed func()
	// IngestIdleTimeout bounds how long an upload may wait for its next
	// message (its start message, a leaf chunk, its close) after the
	// previous one or the stream's start (0: service.DefaultIdleTimeout).
	// An upload idle for longer is ended with DeadlineExceeded, which an
	// appliance retries, and returns its share of the ingest budget; this
	// is what ends the uploads of a peer that answers pings but sends
	// nothing.
	IngestIdleTimeout time.Duration
	// IngestMaxUploadTime bounds an upload's reception, from the stream's
	// start to its close (0: service.DefaultMaxUploadTime), however
	// steadily it sends: one that takes longer is ended with
	// DeadlineExceeded, as an idle one, and returns its share.
	IngestMaxUploadTime time.Duration
	// OnUploadAdmitted, when set, is called when an upload has its share of
	// the ingest budget, with the leaves it announced, before they are read.
	OnUploadAdmitted func(leaves int)
	// RESTWriteTimeout bounds a REST request from the end of its headers
	// to the end of its answer (0: DefaultRESTWriteTimeout); past it the
	// connection is closed.
	RESTWriteTimeout time.Duration
	// OnRESTConnClosed, when set, is called once a REST connection is
	// closed (tests).
	OnRESTConnClosed func()
	// MetricsAddr, when set, serves the plane's Prometheus metrics at
	// GET /metrics on a listener of its own (docs/central.md, "Metrics").
	MetricsAddr string
	// Registerer, when set, takes the plane's own metrics (ingest, REST,
	// prune) instead of a registry of the plane's, for a caller that
	// serves them itself (tollgate dev, beside the appliance's). It
	// excludes MetricsAddr.
	Registerer prometheus.Registerer
	// OnReady is called once every listener is bound.
	OnReady func(Addrs)
	// HealthTimeout bounds the store's answer to a readiness check,
	// GET /healthz (0: rest.DefaultHealthTimeout).
	HealthTimeout time.Duration
	// ShutdownDrain is how long the plane keeps serving once ctx ends,
	// with GET /healthz answering 503, before its listeners close: the
	// time a balancer takes to see the replica not ready and send new
	// requests elsewhere (its check interval times the failures it
	// needs). 0: none, the listeners close at once.
	ShutdownDrain time.Duration
	// OnDrain, when set, is called once GET /healthz answers 503 at the
	// start of a stop, before the drain's wait (tests).
	OnDrain func()
	// ShutdownGrace bounds how long calls and requests in flight may take
	// to finish once ctx ends (an appliance's upload stream, a REST
	// query); what is left then is cut. 0 means DefaultShutdownGrace, a
	// negative value none.
	ShutdownGrace time.Duration
}

// Addrs are the bound addresses.
type Addrs struct {
	REST, GRPC, Ingest string
	// Metrics is the metrics listener's address; empty when it is off.
	Metrics string
}

// Run serves until ctx ends, then stops the servers.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Store == nil || cfg.Tokens == nil || cfg.FleetCA == nil {
		return errors.New("central: a store, tokens and the fleet CA are required")
	}
	if cfg.Registerer != nil && cfg.MetricsAddr != "" {
		return errors.New("central: a metrics address and an outside registerer exclude each other")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PruneInterval <= 0 {
		cfg.PruneInterval = DefaultPruneInterval
	}
	// Every address is bound before anything starts.
	ls := lifecycle.NewListeners("central")
	defer ls.Close()
	lis := map[string]net.Listener{}
	addrs := map[string]string{"rest": cfg.RESTAddr, "grpc": cfg.GRPCAddr, "ingest": cfg.IngestAddr}
	if cfg.MetricsAddr != "" {
		addrs["metrics"] = cfg.MetricsAddr
	}
	for name, addr := range addrs {
		l, err := ls.Listen(ctx, name, addr)
		if err != nil {
			return err
		}
		lis[name] = l
	}
	reg := cfg.Registerer
	var own *prometheus.Registry
	if reg == nil {
		own = prometheus.NewRegistry()
		own.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		reg = own
	}
	pruneMetrics := newMetrics(reg)
	in, err := ingest.New(ingest.Options{CA: cfg.FleetCA, Store: cfg.Store, Now: cfg.Now,
		MaxForksPerTree: cfg.MaxForksPerTree, Logger: cfg.Logger})
	if err != nil {
		return err
	}
	svc, err := service.NewIngest(in, cfg.FleetCA, service.IngestOptions{
		Now: cfg.Now, MaxLeaves: cfg.MaxLeavesPerHead, MaxUploads: cfg.IngestMaxUploads, MaxUploadsPerAppliance: cfg.IngestMaxUploadsPerAppliance,
		MaxPendingLeaves: cfg.IngestMaxPendingLeaves, IdleTimeout: cfg.IngestIdleTimeout, MaxUploadTime: cfg.IngestMaxUploadTime, OnAdmit: cfg.OnUploadAdmitted,
		Metrics: service.NewIngestMetrics(reg), Logger: cfg.Logger,
	})
	if err != nil {
		return fmt.Errorf("central: ingest limits: %w", err)
	}
	ingestSrv := grpcserver.New(cfg.Logger, ingestOptions(cfg)...)
	centralv1.RegisterCentralAuditServiceServer(ingestSrv, svc)
	querySrv := grpcserver.New(cfg.Logger, grpc.UnaryInterceptor(cfg.Tokens.UnaryInterceptor), grpc.MaxRecvMsgSize(maxQueryMessage))
	centralv1.RegisterAuditQueryServiceServer(querySrv, service.NewQuery(cfg.Store, cfg.Logger, service.WithMaxResponse(MaxQueryResponse)))

	conn, err := grpc.NewClient(lis["grpc"].Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxQueryResponse)))
	if err != nil {
		return fmt.Errorf("central: dial the gRPC listener: %w", err)
	}
	defer conn.Close()
	health := rest.NewHealth(cfg.Store.Ping, cfg.HealthTimeout, cfg.Logger)
	handler, err := rest.Handler(ctx, conn, cfg.Tokens, cfg.Logger, rest.WithHealth(health))
	if err != nil {
		return err
	}
	writeTimeout := cfg.RESTWriteTimeout
	if writeTimeout <= 0 {
		writeTimeout = DefaultRESTWriteTimeout
	}
	httpSrv := &http.Server{
		Handler:           rest.Instrument(handler, rest.NewMetrics(reg)),
		ReadHeaderTimeout: 10 * time.Second,
		// A client that reads its answer too slowly (a heads list is up
		// to 64 MiB) does not hold it, and its connection, for ever.
		WriteTimeout: writeTimeout,
		IdleTimeout:  2 * time.Minute,
		// Requests are GETs with a token: no body, small headers.
		MaxHeaderBytes: MaxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed && cfg.OnRESTConnClosed != nil {
				cfg.OnRESTConnClosed()
			}
		},
	}

	var metricsSrv *http.Server
	if lis["metrics"] != nil {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(own, promhttp.HandlerOpts{}))
		// ReadTimeout bounds what net/http reads of a scrape's unread
		// body too: a stalled one cannot hold the connection.
		metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second,
			ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)}
	}

	restLis := lis["rest"]
	if cfg.RESTTLS == nil && !netaddr.IsLoopback(cfg.RESTAddr) {
		cfg.Logger.Warn("the REST audit API serves plain HTTP on a non-loopback address: audit tokens cross the network in the clear; "+
			"give it a certificate (--rest-tls-cert) or keep it behind a TLS proxy", slog.String("addr", cfg.RESTAddr))
	}
	if cfg.RESTTLS != nil {
		restLis = netaddr.HTTP1Listener(restLis, cfg.RESTTLS) // --rest-write-timeout bounds a connection's answer
	}
	ls.Serving() // the servers close their listeners from here on
	g, gctx := lifecycle.NewGroup(ctx, "central")
	g.GRPC("ingest", ingestSrv, limitIngest(lis["ingest"], cfg))
	g.GRPC("gRPC", querySrv, lis["grpc"])
	g.HTTP("REST", httpSrv, restLis)
	if metricsSrv != nil {
		g.HTTP("metrics", metricsSrv, lis["metrics"])
	}
	g.Go(func() error { pruneLoop(gctx, cfg, pruneMetrics); return nil })
	a := Addrs{REST: lis["rest"].Addr().String(), GRPC: lis["grpc"].Addr().String(), Ingest: lis["ingest"].Addr().String()}
	if metricsSrv != nil {
		a.Metrics = lis["metrics"].Addr().String()
	}
	cfg.Logger.Info("central plane up", "rest", a.REST, "grpc", a.GRPC, "ingest", a.Ingest, "metrics", a.Metrics)
	if cfg.OnReady != nil {
		cfg.OnReady(a)
	}
	g.OnStop(func() {
		drain(ctx, cfg, health)
		stop(ctx, cfg, httpSrv, ingestSrv, querySrv)
		if metricsSrv != nil {
			// A scrape takes no time worth waiting for.
			_ = metricsSrv.Close()
		}
	})
	return g.Wait()
}

// ingestOptions are the ingest server's: mTLS with the fleet CA, a bound
// on a connection's handshake, and on its streams (gRPC's default is
// unbounded), keepalive that closes the connections of appliances that went away
// (their stalled uploads end before, at the idle timeout), and a graceful
// close of connections that carry no upload for long.
func ingestOptions(cfg Config) []grpc.ServerOption {
	streams := cfg.IngestMaxStreams
	if streams <= 0 {
		streams = DefaultIngestMaxStreams
	}
	ka := keepalive.ServerParameters{Time: cfg.IngestKeepalive, Timeout: cfg.IngestKeepaliveTimeout}
	if ka.Time <= 0 {
		ka.Time = DefaultIngestKeepalive
	}
	if ka.Timeout <= 0 {
		ka.Timeout = DefaultIngestKeepaliveTimeout
	}
	if ka.MaxConnectionIdle = cfg.IngestMaxConnIdle; ka.MaxConnectionIdle <= 0 {
		ka.MaxConnectionIdle = DefaultIngestMaxConnIdle
	}
	handshake := cfg.IngestHandshakeTimeout
	if handshake <= 0 {
		handshake = DefaultIngestHandshakeTimeout
	}
	return []grpc.ServerOption{
		grpc.ConnectionTimeout(handshake),
		grpc.Creds(credentials.NewTLS(tlsconf.Server(cfg.IngestCert, cfg.FleetCA))),
		grpc.MaxConcurrentStreams(uint32(streams)),
		grpc.KeepaliveParams(ka),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: ingestPingMinTime, PermitWithoutStream: true}),
	}
}

// limitIngest bounds the ingest listener's open connections, in all and
// per remote address, and logs refusals: the first of a run, then each
// time the run doubles, so that a flood of connections does not flood the
// log.
func limitIngest(l net.Listener, cfg Config) net.Listener {
	maxConns := cfg.IngestMaxConns
	if maxConns <= 0 {
		maxConns = DefaultIngestMaxConns
	}
	perHost := cfg.IngestMaxConnsPerHost
	if perHost <= 0 {
		perHost = DefaultIngestMaxConnsPerHost
	}
	return connlimit.New(l, connlimit.Options{
		Max:        maxConns,
		MaxPerHost: perHost,
		OnRefuse: func(inARow uint64, host netip.Addr) {
			switch {
			case inARow&(inARow-1) != 0:
			case host.IsValid():
				cfg.Logger.Warn("central: ingest connection refused, too many open from its address",
					"remote_ip", host.String(), "max_conns_per_host", perHost, "refused_in_a_row", inARow)
			default:
				cfg.Logger.Warn("central: ingest connection refused, too many open", "max_conns", maxConns, "refused_in_a_row", inARow)
			}
		},
		OnRelease: cfg.OnIngestConnClosed,
	})
}

// drain makes readiness answer 503, then keeps every listener serving for
// cfg.ShutdownDrain, so that a balancer stops sending new requests before
// they would be refused. A stop that a failed listener started, not ctx,
// does not wait: the plane is not serving as it should.
func drain(ctx context.Context, cfg Config, health *rest.Health) {
	health.Drain()
	if cfg.OnDrain != nil {
		cfg.OnDrain()
	}
	if cfg.ShutdownDrain <= 0 || ctx.Err() == nil {
		return
	}
	cfg.Logger.Info("central: draining: GET /healthz answers 503 before the listeners close", slog.Duration("drain", cfg.ShutdownDrain))
	time.Sleep(cfg.ShutdownDrain)
}

// stop drains the servers within cfg.ShutdownGrace and cuts what is left.
// The REST gateway calls the query server, so that one stops after it;
// the ingest server stops beside them.
func stop(ctx context.Context, cfg Config, httpSrv *http.Server, ingestSrv, querySrv *grpc.Server) {
	grace := grpcserver.Grace(cfg.ShutdownGrace, DefaultShutdownGrace)
	cfg.Logger.Info("central: shutting down", slog.Duration("grace", grace))
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	var cut atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		if !grpcserver.Stop(sctx, ingestSrv) {
			cut.Store(true)
		}
	})
	if err := httpSrv.Shutdown(sctx); err != nil {
		cut.Store(true)
		_ = httpSrv.Close()
	}
	if !grpcserver.Stop(sctx, querySrv) {
		cut.Store(true)
	}
	wg.Wait()
	if cut.Load() {
		level := slog.LevelWarn
		if grace == 0 {
			level = slog.LevelInfo
		}
		cfg.Logger.Log(ctx, level, "central: calls still running at the end of the grace were cut", slog.Duration("grace", grace))
	}
}

// pruneLoop applies retention (store.Store.Prune: heads after
// store.HeadRetentionYears, leaves after their tree's leaf retention) now
// and every interval until ctx ends, counting each pass in m.
func pruneLoop(ctx context.Context, cfg Config, m *metrics) {
	ticks := cfg.PruneTicks
	if ticks == nil {
		t := time.NewTicker(cfg.PruneInterval)
		defer t.Stop()
		ticks = t.C
	}
	for {
		p, err := cfg.Store.Prune(ctx, cfg.Now())
		m.pruned(p, err, ctx.Err() != nil)
		switch {
		case err != nil && ctx.Err() == nil:
			cfg.Logger.Error("central: pruning failed", "err", err)
		case p.Trees > 0 || p.LeafTrees > 0:
			cfg.Logger.Info("central: retention applied", "trees_deleted", p.Trees, "trees_leaves_deleted", p.LeafTrees)
		}
		if cfg.OnPrune != nil {
			cfg.OnPrune(p, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
	}
}
