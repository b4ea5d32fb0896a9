// Package pipeline is the governed request pipeline every caller of the
// appliance goes through, whatever its transport: the HTTP edge calls it
// in-process, and the gRPC InferenceService (Service) wraps it. A Call
// walks these steps, in this order, each owned here once:
//
//	authenticate   Pipeline.Authenticate (and Call.Reauthenticate once a
//	               body has arrived): the virtual key's Principal
//	policy         Call.DecideChat, DecideEmbeddings, DecideModels: the
//	               key's model and tool: scopes, then the bundle; a chat
//	               request's tools may be narrowed
//	limits         Call.ReserveChat (the reply's bound: the smallest of
//	               max_tokens, the key's and the model's maximum; then
//	               the engine's exact prompt count plus that bound),
//	               Call.Admit: RPM and TPD
//	engine         Call.Chat (the reply's tool calls kept to the tools
//	               exposed), Call.Embed, Call.Models
//	audit, settle  Call.Finish (or Record then Settle for a stream): the
//	               durable event before the caller sees the end of its
//	               response, then the real usage charged
//
// What a front keeps is its transport: decoding, the bytes of its
// responses (which the audit event hashes), headers or metadata, and how
// an Error is told to its client. Every step's refusal is an *Error whose
// Kind says what the client is told.
package pipeline

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/tracing"
	"github.com/tollgate-dev/tollgate/server/keys"
	"github.com/tollgate-dev/tollgate/server/limits"
	"github.com/tollgate-dev/tollgate/server/policy"
)

// Authenticator resolves a bearer secret (keys.Cache); it returns
// keys.ErrUnauthorized for a missing, unknown, expired or revoked key.
type Authenticator interface {
	Authenticate(secret string) (*keys.Principal, error)
}

// Decider makes the policy decision for a request (policy.Engine).
type Decider interface {
	Decide(ctx context.Context, in policy.Input) (policy.Decision, error)
}

// Limiter admits requests against a key's RPM and TPD (limits.Limiter).
type Limiter interface {
	Admit(ctx context.Context, p *keys.Principal, reserve int64) (limits.Reservation, error)
	Peek(p *keys.Principal) limits.State
}

// Recorder durably records a request's audit event (audit/log.Log): Append
// returns once the event is on disk.
type Recorder interface {
	Append(ctx context.Context, ev auditlog.Event) (auditlog.Receipt, error)
}

// StreamRecorder is a Recorder that also records, durably, that a stream
// is about to send its first byte (audit/log.Log): if the process dies
// before the stream's event is appended, the log records the stream as
// interrupted when it is next opened. A Recorder without it leaves a
// stream cut by a crash unrecorded.
type StreamRecorder interface {
	Start(ctx context.Context, s auditlog.StreamStart) error
}

// StreamStarter is a StreamRecorder whose start can sync while the model
// is asked (audit/log.Log): Chat begins a stream's start before calling
// the engine, and Start waits for it, so that the sync and the model's
// first event overlap and the first byte still waits for the sync.
type StreamStarter interface {
	BeginStart(ctx context.Context, s auditlog.StreamStart) (*auditlog.PendingStart, error)
}

// Config is what the pipeline needs. Inference and Auth are required.
type Config struct {
	// Inference reaches the engines: the appliance's own inference
	// service in-process (inference.LocalClient).
	Inference inferencev1.InferenceServiceClient
	Auth      Authenticator
	// Policy decides every request (the key's scopes included) before
	// the engine sees it. nil means policy.ScopesOnly: the key's scopes,
	// with no bundle.
	Policy Decider
	// Limits, when set, admits every request against its key's RPM and
	// TPD before the engine runs; it is settled with the real usage.
	Limits Limiter
	// Audit, when set, records every authenticated request durably
	// before its caller sees the end of its response.
	Audit Recorder
	// Receipts serves the receipts of recorded requests (GET
	// /v1/receipts/{id}); nil serves none.
	Receipts Receipts
	// Responses keeps the Responses API's stored responses (store,
	// previous_response_id, GET and DELETE /v1/responses/{id}); nil
	// stores nothing, and every stored id is then not found.
	Responses ResponseStore
	// ApplianceID (app_<id>) is given to the policy with every decision.
	ApplianceID string
	Logger      *slog.Logger     // nil means slog.Default()
	Now         func() time.Time // nil means time.Now
	// Tracer makes the spans of every step (docs/tracing.md); nil means
	// the no-op tracer.
	// A front reads the traceparent of its requests and starts their
	// spans only when it is set: a nil Tracer skips that work altogether.
	Tracer trace.Tracer
}

// Pipeline runs governed calls. It is safe for concurrent use.
type Pipeline struct {
	cfg Config
	log *slog.Logger
	// tracing: Config.Tracer was set.
	tracing bool
}

// New returns a pipeline over cfg.
func New(cfg Config) *Pipeline {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Policy == nil {
		cfg.Policy = policy.ScopesOnly{}
	}
	traced := cfg.Tracer != nil
	if !traced {
		cfg.Tracer = tracing.Disabled()
	}
	return &Pipeline{cfg: cfg, log: cfg.Logger, tracing: traced}
}

// Tracer is the tracer of the pipeline's spans (the no-op one when
// tracing is disabled).
func (p *Pipeline) Tracer() trace.Tracer { return p.cfg.Tracer }

// noSpan is the span of every step without tracing: it records nothing.
var noSpan = trace.SpanFromContext(context.Background())

// StartSpan starts a span of a step outside any call (authentication),
// a child of ctx's span; without tracing it returns ctx and a span that
// records nothing, at no cost.
func (p *Pipeline) StartSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	return p.startSpan(ctx, name, nil)
}

// startSpan is StartSpan for c's steps (c may be nil): the first one
// keeps its parent, the request's span, for Settle.
func (p *Pipeline) startSpan(ctx context.Context, name string, c *Call) (context.Context, trace.Span) {
	if !p.tracing {
		return ctx, noSpan
	}
	if c != nil && c.parent == nil {
		c.parent = trace.SpanFromContext(ctx)
	}
	return p.cfg.Tracer.Start(ctx, name)
}

// Tracing reports whether the pipeline's spans are recorded
// (Config.Tracer is set).
func (p *Pipeline) Tracing() bool { return p.tracing }

// Now is the pipeline's clock.
func (p *Pipeline) Now() time.Time { return p.cfg.Now() }

// Audited reports whether calls are recorded (Config.Audit is set): a
// front that records the bytes it sends keeps them only then.
func (p *Pipeline) Audited() bool { return p.cfg.Audit != nil }

// Authenticate resolves a bearer secret. Every way of failing is an
// *Error of KindUnauthorized, except the Authenticator failing for
// another reason (KindInternal). A refusal here belongs to no tenant and
// is not recorded: the front logs it and counts it instead.
func (p *Pipeline) Authenticate(secret string) (*keys.Principal, error) {
	if secret == "" {
		return nil, unauthorized()
	}
	pr, err := p.cfg.Auth.Authenticate(secret)
	if err == nil && pr == nil {
		err = keys.ErrUnauthorized
	}
	if err != nil {
		return nil, authError(err)
	}
	return pr, nil
}
