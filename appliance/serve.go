package appliance

import (
	"context"
	"log/slog"

	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/internal/grpcserver"
	"github.com/tollgate-dev/tollgate/internal/lifecycle"
)

// serve runs every part of the appliance until ctx ends or one fails, then
// stops them (shutdown).
func (a *app) serve(ctx context.Context) error {
	cfg := a.cfg
	g, gctx := lifecycle.NewGroup(ctx, "appliance")
	if a.metricsSrv != nil {
		g.HTTP("metrics", a.metricsSrv, a.metricsLis)
	}
	if a.portalSrv != nil {
		g.HTTP("portal", a.portalSrv, a.portalLis)
	}
	g.GRPC("gRPC", a.grpcSrv, a.grpcLis)
	g.Go(func() error { return a.cache.Run(gctx) })
	if a.grpcHealth != nil {
		g.Go(func() error { return a.grpcHealth.run(gctx) })
	}
	g.Go(func() error { return a.limiter.Run(a.limiterCtx) })
	if a.responses != nil {
		g.Go(func() error { return a.responses.Run(gctx, 0, cfg.Now) })
	}
	for _, e := range a.engines {
		if r, ok := e.(interface{ Run(context.Context) error }); ok {
			g.Go(func() error { return r.Run(gctx) })
		}
	}
	if cfg.Audit != nil {
		interval := cfg.HeadInterval
		if interval <= 0 {
			interval = DefaultHeadInterval
		}
		g.Go(func() error { return cfg.Audit.Run(a.auditCtx, interval) })
	}
	if cfg.Policy != nil && cfg.PolicyPath != "" {
		g.Go(func() error { return cfg.Policy.WatchFile(gctx, cfg.PolicyPath, policyPollInterval) })
	}
	// The gateway serves at once: until the key cache has loaded, /healthz
	// says it is starting and every other request is 503, rather than
	// connections queueing unanswered while etcd is unreachable.
	g.HTTP("gateway", a.httpSrv, a.httpLis)
	g.Go(func() error {
		if awaitKeyCache(gctx, a.cache.Ready(), a.httpLis.Addr().String(), a.grpcLis.Addr().String(), a.log) && cfg.OnReady != nil {
			cfg.OnReady(a.addrs())
		}
		return nil
	})
	g.OnStop(func() { a.shutdown(ctx) })
	return g.Wait()
}

// addrs are the addresses the appliance listens on.
func (a *app) addrs() Addrs {
	addrs := Addrs{Gateway: a.httpLis.Addr().String(), GRPC: a.grpcLis.Addr().String()}
	if a.metricsLis != nil {
		addrs.Metrics = a.metricsLis.Addr().String()
	}
	if a.portalLis != nil {
		addrs.Portal = a.portalLis.Addr().String()
	}
	return addrs
}

// shutdown stops the appliance: the gateway's requests and the gRPC calls
// drain for the grace, alongside (both are governed calls, recorded and
// settled before the limiter and the audit log stop); what is left then is
// ended (a stream with one error event, 503) and given shutdownFinish
// more; then the limiter gives back what it holds, and the audit log's
// last round signs what the drained requests recorded.
func (a *app) shutdown(ctx context.Context) {
	log := a.log
	if a.grpcHealth != nil {
		a.grpcHealth.draining() // NOT_SERVING from now on
		a.grpcHealth.stop()     // the watches would hold the graceful stop
	}
	grace := grpcserver.Grace(a.cfg.ShutdownGrace, DefaultShutdownGrace)
	log.Info("shutting down", slog.Duration("grace", grace), slog.Int("in_flight", a.handler.InFlight()))
	base := context.WithoutCancel(ctx)
	sctx, cancel := context.WithTimeout(base, grace)
	defer cancel()
	// What is left once the grace is over gets shutdownFinish more.
	fctx, cancelFinish := context.WithTimeout(base, grace+shutdownFinish)
	defer cancelFinish()
	grpcDrained := make(chan struct{})
	go func() {
		defer close(grpcDrained)
		grpcserver.Stop(sctx, a.grpcSrv)
	}()
	if err := a.httpSrv.Shutdown(sctx); err != nil {
		// The grace is over: the requests still running are ended
		// (each writes its error and records its event), then what
		// is left is closed.
		level := slog.LevelWarn
		if grace == 0 {
			level = slog.LevelInfo
		}
		log.Log(ctx, level, "gateway did not drain in time; ending the requests in flight",
			slog.Duration("grace", grace), slog.Int("in_flight", a.handler.InFlight()))
		a.endRequests(edge.ErrShuttingDown)
		if err := a.httpSrv.Shutdown(fctx); err != nil {
			_ = a.httpSrv.Close()
			// Close does not wait for the handlers it released (a
			// stream blocked writing to a client that stopped
			// reading): they still record their events, so the
			// limiter and the audit log wait for them, a bounded
			// while.
			dctx, cancelDrain := context.WithTimeout(base, drainAfterClose)
			if !a.handler.Drained(dctx) {
				log.Error("requests still running after the gateway closed; their audit events may be lost",
					slog.Int("in_flight", a.handler.InFlight()))
			}
			cancelDrain()
		}
	}
	_ = a.httpLis.Close()
	if a.portalSrv != nil {
		// Its pages are short: what has not finished by now is cut.
		if err := a.portalSrv.Shutdown(fctx); err != nil {
			_ = a.portalSrv.Close()
		}
	}
	if a.metricsSrv != nil {
		_ = a.metricsSrv.Close()
	}
	<-grpcDrained
	a.stopLimiter()
	a.stopAudit() // its last round signs what the drained requests recorded
}
