package appliance

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/tollgate-dev/tollgate/internal/grpcserver"
	"github.com/tollgate-dev/tollgate/internal/netaddr"
	"github.com/tollgate-dev/tollgate/internal/tracing"
	"github.com/tollgate-dev/tollgate/server/access"
)

// checkGRPC refuses a gRPC listener that would carry credentials in the
// clear off loopback (unless GRPCInsecure says so), and operators that no
// certificate could be verified for.
func checkGRPC(cfg *Config) error {
	if _, _, err := net.SplitHostPort(cfg.GRPCAddr); err != nil {
		return fmt.Errorf("appliance: gRPC address %q: %w", cfg.GRPCAddr, err)
	}
	if cfg.GRPCTLS == nil && !cfg.GRPCInsecure && !netaddr.IsLoopback(cfg.GRPCAddr) {
		return fmt.Errorf("appliance: the gRPC listener serves %q without TLS: give it a certificate, a loopback address, or GRPCInsecure", cfg.GRPCAddr)
	}
	if len(cfg.GRPCOperators) > 0 && (cfg.GRPCTLS == nil || cfg.GRPCTLS.ClientCAs == nil) {
		return fmt.Errorf("appliance: gRPC operators need TLS with client CAs to verify their certificates")
	}
	return nil
}

// maxStreamsPerConn bounds the calls one gRPC connection carries at once.
const maxStreamsPerConn = 256

// newGRPCServer is the appliance's gRPC server: request ids, the access
// rules (access.ApplianceRules) and validation on every call, over TLS
// when cfg.GRPCTLS is set. Once the appliance's services are registered,
// finishGRPCServer adds health and reflection.
func newGRPCServer(cfg *Config, log *slog.Logger, tp *tracing.Provider) *grpc.Server {
	if cfg.GRPCTLS == nil && !netaddr.IsLoopback(cfg.GRPCAddr) {
		log.Warn("the gRPC listener serves plain text off loopback, as configured: audit tokens and virtual keys cross the network in the clear, and no caller can be an operator",
			slog.String("addr", cfg.GRPCAddr))
	}
	guard := access.New(access.Config{
		Rules:       access.ApplianceRules(),
		Operators:   cfg.GRPCOperators,
		AuditTokens: cfg.AuditTokens,
		Logger:      log.With(slog.String("component", "grpc")),
	})
	// Handlers are waited for when the server stops: they use the
	// limiter and the audit log, which stop after it.
	// A connection's concurrent calls are bounded (gRPC's default is
	// not), and so are all calls of the InferenceService
	// (Config.MaxInFlight, as the gateway's requests).
	opts := []grpc.ServerOption{grpc.WaitForHandlers(true), grpc.MaxConcurrentStreams(maxStreamsPerConn)}
	if cfg.GRPCTLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg.GRPCTLS)))
	}
	if tp != nil && tp.Enabled() {
		// Every call's span, the child of its metadata's traceparent.
		opts = append(opts, grpc.ChainUnaryInterceptor(tracing.UnaryServerInterceptor(tp.Tracer())),
			grpc.ChainStreamInterceptor(tracing.StreamServerInterceptor(tp.Tracer())))
	}
	return grpcserver.NewGuarded(log, guard, opts...)
}

// finishGRPCServer adds the health service (unless turned off; returned,
// nil when off) and reflection (unless turned off) to srv, which holds the
// appliance's services, and checks that every method has an access rule.
func finishGRPCServer(srv *grpc.Server, cfg *Config, ready <-chan struct{}, healthy func() (bool, string), log *slog.Logger) (*grpcHealth, error) {
	var h *grpcHealth
	if !cfg.DisableGRPCHealth {
		var services []string
		for name := range srv.GetServiceInfo() {
			services = append(services, name)
		}
		slices.Sort(services)
		h = newGRPCHealth(services, ready, healthy, log.With(slog.String("component", "grpc")))
		healthpb.RegisterHealthServer(srv, h)
	}
	if !cfg.DisableGRPCReflection {
		reflection.Register(srv)
	}
	// A method without a rule would be refused to everyone: a service
	// added without its rule fails the start instead.
	if missing := access.ApplianceRules().Uncovered(srv.GetServiceInfo()); len(missing) > 0 {
		return nil, fmt.Errorf("appliance: gRPC methods without an access rule: %s", strings.Join(missing, ", "))
	}
	return h, nil
}

// grpcHealthPoll is how often the health service's watchers are told of
// a change of the appliance's health; a Check reads it at once.
const grpcHealthPoll = time.Second

// grpcHealth is the standard health service (grpc.health.v1) of the
// appliance: SERVING once the key cache has loaded while the appliance is
// healthy (what the gateway's /healthz says), NOT_SERVING otherwise; the
// same for the server ("") and each of its services.
type grpcHealth struct {
	*health.Server
	services []string
	ready    <-chan struct{}
	healthy  func() (bool, string)
	log      *slog.Logger
	// stopping ends the watches, which would otherwise hold a graceful
	// stop until its end.
	stopping chan struct{}
	stopOnce sync.Once

	mu   sync.Mutex
	last healthpb.HealthCheckResponse_ServingStatus
	// down: the appliance is stopping; the status no longer changes.
	down bool
}

func newGRPCHealth(services []string, ready <-chan struct{}, healthy func() (bool, string), log *slog.Logger) *grpcHealth {
	h := &grpcHealth{Server: health.NewServer(), services: append([]string{""}, services...), ready: ready, healthy: healthy,
		log: log, stopping: make(chan struct{}), last: healthpb.HealthCheckResponse_NOT_SERVING}
	for _, s := range h.services {
		h.SetServingStatus(s, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	return h
}

// update sets every service's status to the appliance's health now.
func (h *grpcHealth) update() {
	st, detail := healthpb.HealthCheckResponse_NOT_SERVING, "key cache not loaded: waiting for etcd"
	select {
	case <-h.ready:
		var ok bool
		if ok, detail = true, "ok"; h.healthy != nil {
			ok, detail = h.healthy()
		}
		if ok {
			st = healthpb.HealthCheckResponse_SERVING
		}
	default:
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down {
		return
	}
	if st != h.last {
		h.log.Info("gRPC health changed", slog.String("status", st.String()), slog.String("detail", detail))
		h.last = st
	}
	for _, s := range h.services {
		h.SetServingStatus(s, st)
	}
}

// Check answers the appliance's health at the time of the call.
func (h *grpcHealth) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.update()
	return h.Server.Check(ctx, req)
}

// List answers the appliance's health at the time of the call.
func (h *grpcHealth) List(ctx context.Context, req *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	h.update()
	return h.Server.List(ctx, req)
}

// Watch streams the status of a service as it changes, until the caller
// leaves or the appliance stops (UNAVAILABLE).
func (h *grpcHealth) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	go func() {
		select {
		case <-h.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := h.Server.Watch(req, &watchStream{Health_WatchServer: stream, ctx: ctx})
	select {
	case <-h.stopping:
		return grpcserver.Error(stream.Context(), codes.Unavailable, grpcserver.ReasonUnavailable, "the appliance is shutting down", nil)
	default:
		return err
	}
}

type watchStream struct {
	healthpb.Health_WatchServer
	ctx context.Context
}

func (w *watchStream) Context() context.Context { return w.ctx }

// run keeps the watchers told of the appliance's health until ctx ends:
// at once when the key cache has loaded, then every grpcHealthPoll.
func (h *grpcHealth) run(ctx context.Context) error {
	tick := time.NewTicker(grpcHealthPoll)
	defer tick.Stop()
	ready := h.ready
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ready:
			ready = nil
		case <-tick.C:
		}
		h.update()
	}
}

// draining reports NOT_SERVING from now on, for good: the appliance is
// stopping.
func (h *grpcHealth) draining() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.down {
		h.down = true
		h.log.Info("gRPC health changed", slog.String("status", healthpb.HealthCheckResponse_NOT_SERVING.String()), slog.String("detail", "shutting down"))
		h.Shutdown()
	}
}

// stop ends the watches.
func (h *grpcHealth) stop() { h.stopOnce.Do(func() { close(h.stopping) }) }
