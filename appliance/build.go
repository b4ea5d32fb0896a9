package appliance

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	auditservice "github.com/tollgate-dev/tollgate/audit/service"
	"github.com/tollgate-dev/tollgate/edge"
	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	keysv1 "github.com/tollgate-dev/tollgate/gen/tollgate/keys/v1"
	policyv1 "github.com/tollgate-dev/tollgate/gen/tollgate/policy/v1"
	"github.com/tollgate-dev/tollgate/internal/h1server"
	"github.com/tollgate-dev/tollgate/internal/lifecycle"
	"github.com/tollgate-dev/tollgate/internal/netaddr"
	"github.com/tollgate-dev/tollgate/internal/tracing"
	"github.com/tollgate-dev/tollgate/server/inference"
	"github.com/tollgate-dev/tollgate/server/inference/builtin"
	"github.com/tollgate-dev/tollgate/server/keys"
	"github.com/tollgate-dev/tollgate/server/limits"
	"github.com/tollgate-dev/tollgate/server/pipeline"
	"github.com/tollgate-dev/tollgate/server/policy"
	"github.com/tollgate-dev/tollgate/server/responsestore"
)

// app is one appliance, built: its listeners, services and servers, and
// what stops the parts that outlive the servers.
type app struct {
	cfg *Config
	log *slog.Logger

	grpcLis, httpLis, metricsLis, portalLis net.Listener

	cache   *keys.Cache
	limiter *limits.Limiter
	engines []inference.Engine
	// responses is the stored responses' file; nil when they are kept in
	// memory (Config.ResponsesPath empty).
	responses *responsestore.Store
	// tracing exports the requests' spans; its tracer is the no-op one
	// without Config.OTLPEndpoint.
	tracing *tracing.Provider

	grpcSrv    *grpc.Server
	grpcHealth *grpcHealth // nil when turned off
	handler    *edge.Server
	httpSrv    *h1server.Server
	metricsSrv *http.Server // nil when off
	portalSrv  *http.Server // nil when off

	// The limiter and the audit log's head signing run until the
	// requests have drained, past the context of Run: in-flight requests
	// settle before the limiter gives its slices back, and the audit
	// log's last round signs the events of the requests that finished
	// during the grace.
	limiterCtx, auditCtx   context.Context
	stopLimiter, stopAudit context.CancelFunc
	endRequests            context.CancelCauseFunc
}

// build binds the appliance's listeners and builds its services and
// servers; nothing runs yet.
func build(ctx context.Context, cfg *Config, ls *lifecycle.Listeners) (_ *app, err error) {
	a := &app{cfg: cfg, log: cfg.Logger}
	defer func() {
		if err != nil {
			a.closeResponses()
			a.stopTracing()
		}
	}()
	if err := a.bind(ctx, ls); err != nil {
		return nil, err
	}
	a.tracing, err = tracing.New(ctx, tracing.Config{Endpoint: cfg.OTLPEndpoint, Insecure: cfg.OTLPInsecure, ApplianceID: cfg.ApplianceID})
	if err != nil {
		return nil, fmt.Errorf("appliance: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, c := range cfg.Collectors {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("appliance: metrics: %w", err)
		}
	}
	a.limiterCtx, a.stopLimiter = context.WithCancel(context.WithoutCancel(ctx))
	a.auditCtx, a.stopAudit = context.WithCancel(context.WithoutCancel(ctx))
	// Requests descend from base, not from ctx: they run on through the
	// grace, and are cancelled with edge.ErrShuttingDown at its end, so
	// that the edge ends them properly rather than as clients gone.
	var base context.Context
	base, a.endRequests = context.WithCancelCause(context.WithoutCancel(ctx))

	store := keys.NewStore(cfg.Etcd, cfg.Now)
	a.cache = keys.NewCache(cfg.Etcd, cfg.Now, a.log.With(slog.String("component", "keys")))
	a.limiter = limits.New(cfg.Etcd, limits.Config{GatewayID: cfg.ApplianceID, Now: cfg.Now, Logger: a.log.With(slog.String("component", "limits"))})
	a.engines = append([]inference.Engine{builtin.New()}, cfg.Engines...)
	inferenceSvc, err := inference.NewService(a.engines...)
	if err != nil {
		return nil, fmt.Errorf("appliance: %w", err)
	}
	core, health, err := a.pipeline(inferenceSvc, reg)
	if err != nil {
		return nil, err
	}
	if err := a.buildGRPC(store, core, health); err != nil {
		return nil, err
	}
	a.handler = edge.New(edge.Config{
		Pipeline:             core,
		Metrics:              edge.NewMetrics(reg),
		Health:               health,
		Logger:               a.log.With(slog.String("component", "edge")),
		MaxBodyBytes:         cfg.MaxBodyBytes,
		MaxInFlight:          cfg.MaxInFlight,
		MaxBodyBytesInFlight: cfg.MaxBodyBytesInFlight,
		BodyReadTimeout:      cfg.BodyReadTimeout,
		WriteStallTimeout:    cfg.WriteStallTimeout,
		Ready:                a.cache.Ready(),
	})
	// The gateway listener is served by h1server rather than net/http:
	// the same HTTP/1.1 behaviour without a background read (a goroutine
	// and its wake-ups) for every request (docs/performance.md).
	a.httpSrv = &h1server.Server{
		Handler:     a.handler,
		BaseContext: func(net.Listener) context.Context { return base },
		// Headers only: the edge bounds each body itself
		// (BodyReadTimeout), as a ReadTimeout would also cut streams, and
		// each write of a response (WriteStallTimeout), as a WriteTimeout
		// would cut a long stream however fast its client reads.
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		Logger:            a.log.With(slog.String("component", "gateway-server")),
		// `OPTIONS *` goes to the edge (a 404 in the envelope): h1server
		// has no handler of its own for it.
	}
	if a.metricsLis != nil {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		// ReadTimeout bounds what net/http reads of a scrape's unread
		// body too: a stalled one cannot hold the connection.
		a.metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second}
	}
	if a.portalLis != nil {
		if a.portalSrv, err = newPortalServer(cfg, store, inferenceSvc, reg, a.log.With(slog.String("component", "portal"))); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// bind binds every listener of the appliance.
func (a *app) bind(ctx context.Context, ls *lifecycle.Listeners) error {
	cfg := a.cfg
	var err error
	if a.grpcLis, err = ls.Listen(ctx, "gRPC", cfg.GRPCAddr); err != nil {
		return err
	}
	if a.httpLis, err = ls.Listen(ctx, "gateway", cfg.GatewayAddr); err != nil {
		return err
	}
	if cfg.GatewayTLS != nil {
		a.httpLis = netaddr.HTTP1Listener(a.httpLis, cfg.GatewayTLS)
	} else if !netaddr.IsLoopback(cfg.GatewayAddr) {
		a.log.Warn("the gateway serves plain HTTP on a non-loopback address: virtual keys cross the network in the clear; "+
			"give it a certificate (--gateway-tls-cert) or keep it behind a TLS proxy", slog.String("addr", cfg.GatewayAddr))
	}
	if cfg.MetricsAddr != "" {
		if a.metricsLis, err = ls.Listen(ctx, "metrics", cfg.MetricsAddr); err != nil {
			return err
		}
	}
	if cfg.PortalAddr != "" {
		listen := func(what, addr string) (net.Listener, error) { return ls.Listen(ctx, what, addr) }
		if a.portalLis, err = listenPortal(listen, cfg.PortalAddr, cfg.PortalTLS); err != nil {
			return err
		}
	}
	return nil
}

// pipeline builds the one governed pipeline every caller goes through:
// the HTTP edge calls it in-process, the gRPC InferenceService wraps it.
// It reaches the engines in-process too (with the same validation as the
// gRPC interceptor). It also returns what /healthz and the gRPC health
// service report: a failed audit log answers every request 500 until
// restarted, which they say, for the supervisor or load balancer.
func (a *app) pipeline(svc *inference.Service, reg prometheus.Registerer) (*pipeline.Pipeline, func() (bool, string), error) {
	cfg := a.cfg
	local := inference.NewLocalClient(svc)
	var err error
	pcfg := pipeline.Config{
		Inference:   local,
		Auth:        a.cache,
		Limits:      a.limiter,
		ApplianceID: cfg.ApplianceID,
		Logger:      a.log.With(slog.String("component", "pipeline")),
		Now:         cfg.Now,
	}
	if a.tracing.Enabled() {
		pcfg.Tracer = a.tracing.Tracer()
	}
	// Stored responses are request and response bodies: kept no longer
	// than the audit log keeps bodies (its default when unaudited).
	retention := auditlog.DefaultRetention
	if cfg.Audit != nil {
		retention = cfg.Audit.Retention()
	}
	if cfg.ResponsesPath == "" {
		pcfg.Responses = pipeline.NewMemoryResponseStore(retention, cfg.ResponsesMaxBytes)
	} else {
		a.responses, err = responsestore.Open(cfg.ResponsesPath, responsestore.Options{
			TTL: retention, MaxBytes: cfg.ResponsesMaxBytes, Logger: a.log.With(slog.String("component", "responses")),
		})
		if err != nil {
			return nil, nil, fmt.Errorf("appliance: %w", err)
		}
		pcfg.Responses = a.responses
	}
	health := a.limiter.Healthy
	if cfg.Policy != nil {
		pcfg.Policy = cfg.Policy
		reg.MustRegister(cfg.Policy.Metrics())
	}
	if cfg.Audit != nil {
		pcfg.Audit = cfg.Audit
		pcfg.Receipts = cfg.Audit
		health = allHealthy(a.limiter.Healthy, cfg.Audit.Healthy)
		reg.MustRegister(cfg.Audit.Metrics())
	}
	return pipeline.New(pcfg), health, nil
}

// buildGRPC builds the gRPC server and registers the appliance's
// services, each behind its access rule (grpc.go).
func (a *app) buildGRPC(store *keys.Store, core *pipeline.Pipeline, health func() (bool, string)) error {
	cfg := a.cfg
	srv := newGRPCServer(cfg, a.log, a.tracing)
	keysv1.RegisterKeysServiceServer(srv, keys.NewService(store, a.cache, a.log))
	if cfg.Policy != nil {
		policyv1.RegisterPolicyServiceServer(srv, policy.NewService(cfg.Policy))
	}
	if cfg.Audit != nil {
		auditservice.Register(srv, cfg.Audit, a.log.With(slog.String("component", "audit")))
	}
	governed := pipeline.NewService(core, cfg.MaxInFlight)
	inferencev1.RegisterInferenceServiceServer(srv, governed)
	var err error
	if a.grpcHealth, err = finishGRPCServer(srv, cfg, a.cache.Ready(), health, a.log); err != nil {
		return err
	}
	a.grpcSrv = srv
	return nil
}

// release stops what outlives the servers, once Run returns: the
// requests have drained (shutdown), so the stored responses' file is
// closed last.
func (a *app) release() {
	a.stopLimiter()
	a.stopAudit()
	a.endRequests(nil)
	a.closeResponses()
	a.stopTracing()
}

// tracingFlush bounds the export of the spans still batched at stop: a
// collector that is down must not hold the appliance's exit.
const tracingFlush = 5 * time.Second

// stopTracing exports the spans still batched (the drained requests'
// last ones) and stops the exporter.
func (a *app) stopTracing() {
	if a.tracing == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracingFlush)
	defer cancel()
	if err := a.tracing.Shutdown(ctx); err != nil {
		a.log.Warn("flushing the last spans failed", slog.Any("err", err))
	}
	a.tracing = nil
}

// closeResponses closes the stored responses' file, if open.
func (a *app) closeResponses() {
	if a.responses == nil {
		return
	}
	if err := a.responses.Close(); err != nil {
		a.log.Error("closing the stored responses failed", slog.Any("err", err))
	}
	a.responses = nil
}
