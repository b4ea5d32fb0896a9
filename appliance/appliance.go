// Package appliance wires the services of one appliance together: the
// gRPC server (Keys, Inference, Policy, Audit, each behind its access
// rule; health; reflection), the key cache and
// the limiter fed by etcd, and the HTTP edge that speaks the OpenAI wire
// format. `tollgate dev` and the
// integration tests both run it.
package appliance

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	auditservice "github.com/tollgate-dev/tollgate/audit/service"
	"github.com/tollgate-dev/tollgate/edge"
	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	keysv1 "github.com/tollgate-dev/tollgate/gen/tollgate/keys/v1"
	policyv1 "github.com/tollgate-dev/tollgate/gen/tollgate/policy/v1"
	"github.com/tollgate-dev/tollgate/internal/grpcserver"
	"github.com/tollgate-dev/tollgate/internal/netaddr"
	"github.com/tollgate-dev/tollgate/server/access"
	"github.com/tollgate-dev/tollgate/server/inference"
	"github.com/tollgate-dev/tollgate/server/inference/builtin"
	"github.com/tollgate-dev/tollgate/server/keys"
	"github.com/tollgate-dev/tollgate/server/limits"
	"github.com/tollgate-dev/tollgate/server/pipeline"
	"github.com/tollgate-dev/tollgate/server/policy"
)

// Config is what an appliance needs. Zero values take the documented
// defaults.
type Config struct {
	// GatewayAddr is the OpenAI-compatible HTTP listener (host:port).
	GatewayAddr string
	// GRPCAddr is the gRPC listener (host:port). Without GRPCTLS it must
	// be a loopback address, unless GRPCInsecure.
	GRPCAddr string
	// GRPCTLS serves the gRPC listener over TLS. With ClientCAs (and
	// ClientAuth tls.VerifyClientCertIfGiven) it verifies the client
	// certificates presented; a verified one naming one of GRPCOperators
	// is an operator's (server/access).
	GRPCTLS *tls.Config
	// GRPCInsecure allows a plain-text gRPC listener off loopback.
	GRPCInsecure bool
	// GRPCOperators are the identities (a certificate's Subject
	// CommonName, or one of its DNS, email or URI SANs) whose verified
	// client certificates may call KeysService and PolicyService. They
	// need GRPCTLS with ClientCAs.
	GRPCOperators []string
	// AuditTokens are the tenants' audit tokens (central/auth.Tokens):
	// AuditService answers a request naming a tenant only to one of its
	// tokens. Nil: none, and every AuditService call is refused.
	AuditTokens access.AuditTokens
	// DisableGRPCHealth and DisableGRPCReflection turn off the gRPC
	// listener's health service (grpc.health.v1) and server reflection,
	// both served to anyone by default.
	DisableGRPCHealth     bool
	DisableGRPCReflection bool
	// Etcd holds key records (and, later, limit counters).
	Etcd *clientv3.Client
	// MaxBodyBytes bounds request bodies; 0 means the edge's default.
	MaxBodyBytes int64
	// MaxInFlight bounds the requests served at once; 0 means the edge's
	// default (edge.DefaultMaxInFlight).
	MaxInFlight int
	// BodyReadTimeout bounds the time a client has to send its request
	// body; 0 means the edge's default.
	BodyReadTimeout time.Duration
	// WriteStallTimeout bounds how long a client may leave a part of its
	// response untaken before its request is given up on; 0 means the
	// edge's default (edge.DefaultWriteStallTimeout).
	WriteStallTimeout time.Duration
	Logger            *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OnReady, when set, is called once every listener is bound and the key
	// cache has loaded, with the bound addresses. The gateway serves from
	// the start, answering 503 until then (edge.Config.Ready).
	OnReady func(Addrs)

	// ApplianceID is app_<id>; it names the appliance to the policy.
	ApplianceID string
	// Policy decides every request; nil serves without a policy bundle
	// (the key's models and tool: scopes still apply: policy.ScopesOnly).
	Policy *policy.Engine
	// PolicyPath, when set with Policy, is watched and reloaded on change.
	PolicyPath string
	// Engines serve models besides the built-in ones, each under a
	// namespace of its own (not "builtin"). An engine that has a
	// Run(context.Context) error method (a model server's, reading its
	// model list again now and then) runs as long as the appliance.
	Engines []inference.Engine
	// Audit records every authenticated request; nil serves unaudited.
	Audit *auditlog.Log
	// HeadInterval is how often signed heads are published (default 60s).
	HeadInterval time.Duration
	// MetricsAddr, when set, serves Prometheus metrics at /metrics.
	MetricsAddr string
	// Collectors are registered with the metrics registry besides the
	// appliance's own (for example the central plane forwarder's backlog).
	Collectors []prometheus.Collector
	// GatewayTLS serves the gateway over TLS (HTTP/1.1). Without it the
	// gateway speaks plain HTTP, for loopback or a TLS proxy in front; a
	// non-loopback address is then warned about at start.
	GatewayTLS *tls.Config
	// PortalAddr, when set, serves the operator portal (package portal,
	// docs/portal.md), where tenant administrators manage their keys.
	PortalAddr string
	// PortalTLS serves the portal over TLS; without it PortalAddr must be
	// a loopback address.
	PortalTLS *tls.Config
	// PortalPublicOrigin is where browsers reach the portal through a
	// reverse proxy, e.g. https://portal.example.com (portal.Config).
	PortalPublicOrigin string
	// PortalRequireTwoStep makes two-step sign-in compulsory for the
	// portal's administrators (portal.Config.RequireTwoStep).
	PortalRequireTwoStep bool
	// ShutdownGrace bounds how long in-flight requests may take to finish
	// once ctx is cancelled; 0 means DefaultShutdownGrace, a negative
	// value none. Requests still running at its end are ended by the edge
	// (a stream with one error event, 503 service_unavailable) before the
	// connections are closed.
	ShutdownGrace time.Duration
}

// Addrs are the addresses an appliance actually listens on.
type Addrs struct {
	Gateway string
	GRPC    string
	// Metrics is the metrics listener's address; empty when it is off.
	Metrics string
	// Portal is the operator portal's address; empty when it is off.
	Portal string
}

// DefaultHeadInterval is how often signed heads are published by default.
const DefaultHeadInterval = 60 * time.Second

// policyPollInterval is how often the policy bundle's files are checked for
// a change.
const policyPollInterval = 2 * time.Second

// waitingWarnAfter is how long the key cache may take to load before the
// wait for etcd is logged as a warning; a normal start loads well within
// it.
var waitingWarnAfter = 2 * time.Second

// DefaultShutdownGrace is how long in-flight requests may take to finish
// once the appliance is asked to stop, by default.
const DefaultShutdownGrace = 15 * time.Second

// shutdownFinish is how long the requests ended at the end of the grace
// have to write their last event and be recorded, and the internal gRPC
// server to drain after a grace that is over, before connections are
// closed.
const shutdownFinish = 2 * time.Second

// drainAfterClose bounds the wait for the handlers that closing the
// gateway's connections released: each only records its event and
// returns.
const drainAfterClose = 10 * time.Second

// Run serves until ctx is cancelled, then stops gracefully: the HTTP edge
// finishes in-flight requests, then the gRPC server drains.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger

	// Every address is bound before anything starts (the metrics one
	// too, so that a busy port fails the start instead of ending an
	// appliance already reported up). Until the servers own them, a
	// failed start closes them.
	var listeners []net.Listener
	serving := false
	defer func() {
		if !serving {
			for _, l := range listeners {
				_ = l.Close()
			}
		}
	}()
	listen := func(what, addr string) (net.Listener, error) {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("appliance: %s listener: %w", what, err)
		}
		listeners = append(listeners, l)
		return l, nil
	}
	if err := checkGRPC(&cfg); err != nil {
		return err
	}
	grpcLis, err := listen("gRPC", cfg.GRPCAddr)
	if err != nil {
		return err
	}
	httpLis, err := listen("gateway", cfg.GatewayAddr)
	if err != nil {
		return err
	}
	if cfg.GatewayTLS != nil {
		httpLis = netaddr.HTTP1Listener(httpLis, cfg.GatewayTLS)
	} else if !netaddr.IsLoopback(cfg.GatewayAddr) {
		log.Warn("the gateway serves plain HTTP on a non-loopback address: virtual keys cross the network in the clear; "+
			"give it a certificate (--gateway-tls-cert) or keep it behind a TLS proxy", slog.String("addr", cfg.GatewayAddr))
	}
	var metricsLis net.Listener
	if cfg.MetricsAddr != "" {
		if metricsLis, err = listen("metrics", cfg.MetricsAddr); err != nil {
			return err
		}
	}
	var portalLis net.Listener
	if cfg.PortalAddr != "" {
		if portalLis, err = listenPortal(listen, cfg.PortalAddr, cfg.PortalTLS); err != nil {
			return err
		}
	}

	store := keys.NewStore(cfg.Etcd, cfg.Now)
	cache := keys.NewCache(cfg.Etcd, cfg.Now, log.With(slog.String("component", "keys")))

	grpcSrv, err := newGRPCServer(&cfg, log)
	if err != nil {
		return err
	}
	keysv1.RegisterKeysServiceServer(grpcSrv, keys.NewService(store, cache, log))
	engines := append([]inference.Engine{builtin.New()}, cfg.Engines...)
	inferenceSvc, err := inference.NewService(engines...)
	if err != nil {
		return fmt.Errorf("appliance: %w", err)
	}
	// The limiter outlives the HTTP server so in-flight requests settle
	// before it gives its slices back.
	limiter := limits.New(cfg.Etcd, limits.Config{GatewayID: cfg.ApplianceID, Now: cfg.Now, Logger: log.With(slog.String("component", "limits"))})
	limiterCtx, stopLimiter := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLimiter()
	// The audit log's head signing, too, runs until the requests have
	// drained: its last round then signs the events of the requests that
	// finished during the grace.
	auditCtx, stopAudit := context.WithCancel(context.WithoutCancel(ctx))
	defer stopAudit()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, c := range cfg.Collectors {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("appliance: metrics: %w", err)
		}
	}
	// One governed pipeline serves every caller: the HTTP edge calls it
	// in-process, the gRPC InferenceService wraps it. It reaches the
	// engines in-process too (with the same validation as the gRPC
	// interceptor).
	local, err := inference.NewLocalClient(inferenceSvc)
	if err != nil {
		return err
	}
	pcfg := pipeline.Config{
		Inference:   local,
		Auth:        cache,
		Limits:      limiter,
		ApplianceID: cfg.ApplianceID,
		Logger:      log.With(slog.String("component", "pipeline")),
		Now:         cfg.Now,
	}
	edgeCfg := edge.Config{
		Metrics:           edge.NewMetrics(reg),
		Health:            limiter.Healthy,
		Logger:            log.With(slog.String("component", "edge")),
		MaxBodyBytes:      cfg.MaxBodyBytes,
		MaxInFlight:       cfg.MaxInFlight,
		BodyReadTimeout:   cfg.BodyReadTimeout,
		WriteStallTimeout: cfg.WriteStallTimeout,
		Ready:             cache.Ready(),
	}
	if cfg.Policy != nil {
		policyv1.RegisterPolicyServiceServer(grpcSrv, policy.NewService(cfg.Policy))
		pcfg.Policy = cfg.Policy
	}
	if cfg.Audit != nil {
		// A failed audit log answers every request 500 until restarted:
		// /healthz says so, for the supervisor or load balancer.
		edgeCfg.Health = allHealthy(limiter.Healthy, cfg.Audit.Healthy)
		auditservice.Register(grpcSrv, cfg.Audit, log.With(slog.String("component", "audit")))
		pcfg.Audit = cfg.Audit
		reg.MustRegister(cfg.Audit.Metrics())
	}
	core := pipeline.New(pcfg)
	edgeCfg.Pipeline = core
	governed, err := pipeline.NewService(core)
	if err != nil {
		return fmt.Errorf("appliance: %w", err)
	}
	inferencev1.RegisterInferenceServiceServer(grpcSrv, governed)
	grpcHealth, err := finishGRPCServer(grpcSrv, &cfg, cache.Ready(), edgeCfg.Health, log)
	if err != nil {
		return err
	}
	// Requests descend from base, not from ctx: they run on through the
	// grace, and are cancelled with edge.ErrShuttingDown at its end, so
	// that the edge ends them properly rather than as clients gone.
	base, endRequests := context.WithCancelCause(context.WithoutCancel(ctx))
	defer endRequests(nil)
	handler := edge.New(edgeCfg)
	httpSrv := &http.Server{
		Handler:     handler,
		BaseContext: func(net.Listener) context.Context { return base },
		// Headers only: the edge bounds each body itself
		// (BodyReadTimeout), as a ReadTimeout would also cut streams, and
		// each write of a response (WriteStallTimeout), as a WriteTimeout
		// would cut a long stream however fast its client reads.
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		// `OPTIONS *` goes to the edge (a 404 in the envelope) instead
		// of net/http's own empty 200.
		DisableGeneralOptionsHandler: true,
	}

	var metricsSrv *http.Server
	if metricsLis != nil {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		// ReadTimeout bounds what net/http reads of a scrape's unread
		// body too: a stalled one cannot hold the connection.
		metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second}
	}

	var portalSrv *http.Server
	if portalLis != nil {
		if portalSrv, err = newPortalServer(&cfg, store, inferenceSvc, reg, log.With(slog.String("component", "portal"))); err != nil {
			return err
		}
	}

	serving = true // the servers close their listeners from here on
	g, gctx := errgroup.WithContext(ctx)
	if metricsSrv != nil {
		g.Go(func() error {
			if err := metricsSrv.Serve(metricsLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("appliance: metrics server: %w", err)
			}
			return nil
		})
	}
	if portalSrv != nil {
		g.Go(func() error { return servePortal(portalSrv, portalLis) })
	}
	g.Go(func() error {
		if err := grpcSrv.Serve(grpcLis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("appliance: gRPC server: %w", err)
		}
		return nil
	})
	g.Go(func() error { return cache.Run(gctx) })
	if grpcHealth != nil {
		g.Go(func() error { return grpcHealth.run(gctx) })
	}
	g.Go(func() error { return limiter.Run(limiterCtx) })
	for _, e := range engines {
		if r, ok := e.(interface{ Run(context.Context) error }); ok {
			g.Go(func() error { return r.Run(gctx) })
		}
	}
	if cfg.Audit != nil {
		interval := cfg.HeadInterval
		if interval <= 0 {
			interval = DefaultHeadInterval
		}
		g.Go(func() error { return cfg.Audit.Run(auditCtx, interval) })
	}
	if cfg.Policy != nil && cfg.PolicyPath != "" {
		g.Go(func() error { return cfg.Policy.WatchFile(gctx, cfg.PolicyPath, policyPollInterval) })
	}
	// The gateway serves at once: until the key cache has loaded, /healthz
	// says it is starting and every other request is 503, rather than
	// connections queueing unanswered while etcd is unreachable.
	g.Go(func() error {
		if err := httpSrv.Serve(httpLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("appliance: gateway server: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		if !awaitKeyCache(gctx, cache.Ready(), httpLis.Addr().String(), grpcLis.Addr().String(), log) {
			return nil
		}
		if cfg.OnReady != nil {
			a := Addrs{Gateway: httpLis.Addr().String(), GRPC: grpcLis.Addr().String()}
			if metricsLis != nil {
				a.Metrics = metricsLis.Addr().String()
			}
			if portalLis != nil {
				a.Portal = portalLis.Addr().String()
			}
			cfg.OnReady(a)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		if grpcHealth != nil {
			grpcHealth.draining() // NOT_SERVING from now on
		}
		grace := grpcserver.Grace(cfg.ShutdownGrace, DefaultShutdownGrace)
		log.Info("shutting down", slog.Duration("grace", grace), slog.Int("in_flight", handler.InFlight()))
		sctx, cancel := context.WithTimeout(context.WithoutCancel(gctx), grace)
		defer cancel()
		// What is left once the grace is over gets shutdownFinish more.
		fctx, cancelFinish := context.WithTimeout(context.WithoutCancel(gctx), grace+shutdownFinish)
		defer cancelFinish()
		// gRPC calls drain alongside the gateway's requests: both are
		// governed calls, recorded and settled before the limiter and
		// the audit log stop.
		if grpcHealth != nil {
			grpcHealth.stop() // the watches would hold the graceful stop
		}
		grpcDrained := make(chan struct{})
		go func() {
			defer close(grpcDrained)
			grpcserver.Stop(sctx, grpcSrv)
		}()
		if err := httpSrv.Shutdown(sctx); err != nil {
			// The grace is over: the requests still running are ended
			// (each writes its error and records its event), then what
			// is left is closed.
			level := slog.LevelWarn
			if grace == 0 {
				level = slog.LevelInfo
			}
			log.Log(ctx, level, "gateway did not drain in time; ending the requests in flight",
				slog.Duration("grace", grace), slog.Int("in_flight", handler.InFlight()))
			endRequests(edge.ErrShuttingDown)
			if err := httpSrv.Shutdown(fctx); err != nil {
				_ = httpSrv.Close()
				// Close does not wait for the handlers it released (a
				// stream blocked writing to a client that stopped
				// reading): they still record their events, so the
				// limiter and the audit log wait for them, a bounded
				// while.
				dctx, cancelDrain := context.WithTimeout(context.WithoutCancel(gctx), drainAfterClose)
				if !handler.Drained(dctx) {
					log.Error("requests still running after the gateway closed; their audit events may be lost",
						slog.Int("in_flight", handler.InFlight()))
				}
				cancelDrain()
			}
		}
		_ = httpLis.Close()
		if portalSrv != nil {
			// Its pages are short: what has not finished by now is cut.
			if err := portalSrv.Shutdown(fctx); err != nil {
				_ = portalSrv.Close()
			}
		}
		if metricsSrv != nil {
			_ = metricsSrv.Close()
		}
		<-grpcDrained
		stopLimiter()
		stopAudit() // its last round signs what the drained requests recorded
		return nil
	})
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// awaitKeyCache waits until the key cache has loaded (true) or ctx is done
// (false). A load that takes longer than a normal start is logged once as
// a warning, and its end at Info.
func awaitKeyCache(ctx context.Context, ready <-chan struct{}, gateway, grpcAddr string, log *slog.Logger) bool {
	warn := time.NewTimer(waitingWarnAfter)
	defer warn.Stop()
	select {
	case <-ready:
		return true
	case <-ctx.Done():
		return false
	case <-warn.C:
	}
	log.Warn("waiting for etcd: the key cache has not loaded; the gateway answers 503 until it has",
		slog.String("gateway", gateway), slog.String("grpc", grpcAddr))
	select {
	case <-ready:
		log.Info("etcd reachable: key cache loaded, gateway serving", slog.String("gateway", gateway))
		return true
	case <-ctx.Done():
		return false
	}
}
