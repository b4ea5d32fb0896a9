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
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/internal/lifecycle"
	"github.com/tollgate-dev/tollgate/server/access"
	"github.com/tollgate-dev/tollgate/server/inference"
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
	// MaxBodyBytesInFlight bounds the request bodies held at once; 0
	// means edge.DefaultMaxBodyBytesInFlight.
	MaxBodyBytesInFlight int64
	// MaxInFlight bounds the requests served at once, and separately the
	// gRPC InferenceService's calls; 0 means the edge's default
	// (edge.DefaultMaxInFlight, as pipeline.DefaultMaxInFlight).
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
	// ResponsesPath is the file of the Responses API's stored responses
	// (responsestore.FileName in the data directory), kept across
	// restarts; the appliance opens it, and closes it once its requests
	// have drained. Empty keeps them in memory, lost when it stops.
	ResponsesPath string
	// ResponsesMaxBytes bounds the stored responses; 0 means
	// pipeline.DefaultResponseStoreBytes.
	ResponsesMaxBytes int64
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
	// PortalSignInsPerAddress is how many sign-ins one client address may
	// start at once, and in a minute (portal.Config.SignInsPerAddress;
	// 0: the portal's default).
	PortalSignInsPerAddress int
	// OTLPEndpoint, when set, is the OTLP/gRPC collector (host:port) the
	// spans of every request are exported to (docs/tracing.md); empty
	// traces nothing, at no cost.
	OTLPEndpoint string
	// OTLPInsecure exports spans without TLS.
	OTLPInsecure bool
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

// Run serves until ctx is cancelled, then stops gracefully: the HTTP
// gateway's requests and the gRPC calls drain (both are governed calls of
// one pipeline), then the limiter gives back what it holds and the audit
// log signs its last heads.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := checkGRPC(&cfg); err != nil {
		return err
	}
	// Every address is bound before anything starts (the metrics one
	// too, so that a busy port fails the start instead of ending an
	// appliance already reported up).
	ls := lifecycle.NewListeners("appliance")
	defer ls.Close()
	a, err := build(ctx, &cfg, ls)
	if err != nil {
		return err
	}
	defer a.release()
	ls.Serving() // the servers close their listeners from here on
	return a.serve(ctx)
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
