package pipeline

import (
	"context"
	"errors"
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/server/inference"
	"github.com/tollgate-dev/tollgate/server/keys"
	"github.com/tollgate-dev/tollgate/server/limits"
	"github.com/tollgate-dev/tollgate/server/policy"
)

// StatusClientClosed is recorded for a call whose client went away before
// any response was sent (nginx's 499).
const StatusClientClosed = 499

// Call is one governed request, from its authenticated key to its audit
// event. It is used by one goroutine at a time.
type Call struct {
	p         *Pipeline
	id        string
	endpoint  string
	principal *keys.Principal
	received  time.Time

	// RequestBody is what the event's request_sha256 covers: the body as
	// received (HTTP), or the request message's encoding (gRPC).
	RequestBody []byte
	// Model is the model the call is for; empty for a model listing.
	Model string
	// PromptTokens and CompletionTokens are the usage recorded; Chat and
	// Embed set them from the engine's reply.
	PromptTokens, CompletionTokens int64

	// validated: the request was checked with protovalidate as received
	// (the gRPC service), so the engine call does not check it again.
	validated bool

	decisionID  string
	reservation limits.Reservation
	admitted    bool
	denied      *limits.Denied
	// receipt is where the recorded event landed (Record), its signed
	// receipt's header value built only when a reply sends it.
	receipt auditlog.Receipt
	// engine is the span of the engine's reply (Chat), ended by its last
	// event, its failure, or at the latest by Record.
	engine trace.Span
	// parent is the request's span, the parent of every step's (kept
	// for Settle, which has no context); nil until a step runs, and
	// always without tracing.
	parent trace.Span
	// stream: the reply is to be streamed (DecideChat,
	// DecideCompletion), so Chat begins the stream's start.
	stream bool
	// started is the stream's start begun by Chat (beginStart), which
	// Start waits for; startErr the failure to begin it.
	started  *auditlog.PendingStart
	startErr error
}

// Begin starts a call of an authenticated key. id is its req_<id>,
// endpoint what its audit event names (an HTTP path, or a gRPC method).
func (p *Pipeline) Begin(id, endpoint string, principal *keys.Principal, received time.Time) *Call {
	return &Call{p: p, id: id, endpoint: endpoint, principal: principal, received: received}
}

// callOptions are the engine call's options: Validated when the request
// was checked as received, so that it is checked exactly once on every
// path (the HTTP edge's requests by the in-process client, the gRPC
// service's before anything else).
func (c *Call) callOptions() []grpc.CallOption {
	if c.validated {
		return validatedOpts
	}
	return nil
}

// chatOptions are the options of the engine's chat call: callOptions, and
// Whole for a reply not streamed, which every caller reads to its end
// before sending any of it, so that the in-process engine runs to its end
// at once instead of being pulled event by event on a coroutine.
func (c *Call) chatOptions() []grpc.CallOption {
	switch {
	case c.stream:
		return c.callOptions()
	case c.validated:
		return validatedWholeOpts
	}
	return wholeOpts
}

var (
	validatedOpts      = []grpc.CallOption{inference.Validated()}
	wholeOpts          = []grpc.CallOption{inference.Whole()}
	validatedWholeOpts = []grpc.CallOption{inference.Validated(), inference.Whole()}
)

// ID is the call's request id.
func (c *Call) ID() string { return c.id }

// Principal is the key the call is served under.
func (c *Call) Principal() *keys.Principal { return c.principal }

// Received is when the call arrived.
func (c *Call) Received() time.Time { return c.received }

// DecisionID is the dec_<id> of the call's policy decision, once made.
func (c *Call) DecisionID() string { return c.decisionID }

// Reauthenticate looks the call's key up again, and from then on serves
// the call under what the key is now: a body may take a while to arrive,
// and a key revoked or expired meanwhile must not be served, nor one whose
// limits were lowered admitted under its old ones. A refusal is
// KindUnauthorized (or KindInternal), to be answered and recorded as the
// key was.
func (c *Call) Reauthenticate(secret string) error {
	pr, err := c.p.Authenticate(secret)
	if err == nil {
		c.principal = pr
		return nil
	}
	e := AsError(err)
	if e.Kind == KindUnauthorized {
		c.p.log.Warn("key revoked or expired while its request was read", "request_id", c.id, "key_id", c.principal.KeyID)
	} else {
		c.p.log.Error("authenticator failed", "request_id", c.id, "err", err)
		e.Logged = true
	}
	return e
}

// decide runs one policy decision: a denial is KindPolicyDenied with the
// decision's id, a failed evaluation KindInternal.
func (c *Call) decide(ctx context.Context, in policy.Input) (policy.Decision, error) {
	in.Key, in.ApplianceID, in.Time = c.principal, c.p.cfg.ApplianceID, c.received
	in.Request.ID = c.id
	ctx, span := c.startSpan(ctx, "policy")
	defer span.End()
	d, err := c.p.cfg.Policy.Decide(ctx, in)
	if span.IsRecording() {
		span.SetAttributes(attribute.Bool("tollgate.allow", err == nil && d.Allow))
		if d.ID != "" {
			span.SetAttributes(attribute.String("tollgate.decision_id", d.ID))
		}
	}
	if err != nil {
		span.SetStatus(codes.Error, "policy evaluation failed")
		if ctx.Err() == nil {
			c.p.log.Error("policy evaluation failed", "request_id", c.id, "err", err)
		}
		e := Internal(err)
		e.Logged = true
		return d, e
	}
	c.decisionID = d.ID
	if !d.Allow {
		return d, &Error{Kind: KindPolicyDenied, Message: d.Reason, DecisionID: d.ID}
	}
	return d, nil
}

// Admit charges the call to its key's limits, reserving reserve tokens. A
// refusal is KindRateLimited (with the limiter's Denied),
// KindLimitsUnavailable, or KindInternal.
//
// While the audit log's disk is full the call is refused first
// (AuditFull): its event could not be recorded, so the engine is spared.
func (c *Call) Admit(ctx context.Context, reserve int64) error {
	if f, ok := c.p.cfg.Audit.(interface{ DiskFull() error }); ok && c.principal != nil {
		if err := f.DiskFull(); err != nil {
			return AuditFull(err)
		}
	}
	l := c.p.cfg.Limits
	if l == nil {
		return nil
	}
	ctx, span := c.startSpan(ctx, "limits")
	res, err := l.Admit(ctx, c.principal, reserve)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int64("tollgate.reserve_tokens", reserve), attribute.Bool("tollgate.admitted", err == nil))
	}
	span.End()
	if err == nil {
		c.reservation, c.admitted = res, true
		return nil
	}
	var denied *limits.Denied // on the heap (errors.As): only for a refusal
	switch {
	case errors.As(err, &denied):
		c.denied = denied
		return &Error{Kind: KindRateLimited, Message: denied.Error(), Denied: denied}
	case errors.Is(err, limits.ErrUnavailable):
		if ctx.Err() == nil {
			c.p.log.Warn("limits unavailable", "request_id", c.id, "err", err)
		}
		return &Error{Kind: KindLimitsUnavailable, Message: "the key's limits cannot be checked right now; retry with backoff", Cause: err, Logged: true}
	default: // a caller's bug, such as a negative reservation
		if ctx.Err() == nil {
			c.p.log.Error("limits admission failed", "request_id", c.id, "err", err)
		}
		e := Internal(err)
		e.Logged = true
		return e
	}
}

// RateLimit is the state of the call's key's limits for the
// x-ratelimit-* values: as the admission (or the refusal) left it, or as
// it is now for a call never admitted. ok is false without limits.
func (c *Call) RateLimit() (st limits.State, ok bool) {
	switch {
	case c.p.cfg.Limits == nil || c.principal == nil:
		return st, false
	case c.denied != nil:
		return c.denied.State, true
	case c.admitted:
		return c.reservation.State(), true
	}
	return c.p.cfg.Limits.Peek(c.principal), true
}

// Settle charges the tokens the call really used against its
// reservation, giving back the rest; once, when the usage is known.
func (c *Call) Settle(used int64) {
	if c.parent != nil {
		_, span := c.p.cfg.Tracer.Start(trace.ContextWithSpan(context.Background(), c.parent), "settle")
		defer span.End()
	}
	c.reservation.Settle(used)
	c.reservation = limits.Reservation{}
}

// Record appends the call's audit event: status is the HTTP status sent
// (or, for gRPC, the HTTP status of its kind: Kind.Status), response the
// bytes sent. The append outlives a caller that went away: the event is
// written whatever happened to the connection. A failed append is logged
// here; the caller must then not get the response it would have.
func (c *Call) Record(ctx context.Context, status int, response []byte) error {
	c.endEngine(nil)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.String("tollgate.model", c.Model), attribute.Int("http.response.status_code", status))
	}
	a := c.p.cfg.Audit
	if a == nil || c.principal == nil {
		return nil
	}
	if c.started != nil {
		// Its error, if any, was the stream's (Start); the event is
		// recorded either way.
		_ = c.started.Wait(context.WithoutCancel(ctx))
	}
	ctx, span := c.startSpan(ctx, "audit.append")
	defer span.End()
	rec, err := a.Append(context.WithoutCancel(ctx), auditlog.Event{
		RequestID:        c.id,
		TenantID:         c.principal.TenantID,
		KeyID:            c.principal.KeyID,
		Time:             c.received,
		Endpoint:         c.endpoint,
		Model:            c.Model,
		Status:           status,
		PromptTokens:     c.PromptTokens,
		CompletionTokens: c.CompletionTokens,
		PolicyDecisionID: c.decisionID,
		RequestBody:      c.RequestBody,
		ResponseBody:     response,
	})
	if err != nil {
		span.SetStatus(codes.Error, "audit append failed")
	}
	if err != nil && !IsAuditFull(err) {
		// A full disk is logged once by the audit log, not per request.
		c.p.log.Error("audit append failed; the response is withheld", "request_id", c.id, "err", err)
	}
	c.receipt = rec
	return err
}

// Start records, durably, that the call's stream is about to send its
// first byte: a stream's event is appended at its end, and without this a
// crash in its middle would leave no trace of a request whose client got
// bytes (the log records it as interrupted at its next open). Call it once
// the stream is certain to begin and before anything of it is sent. A
// failure is logged here and is an internal error: the stream must not
// begin.
func (c *Call) Start(ctx context.Context) error {
	a, ok := c.p.cfg.Audit.(StreamRecorder)
	if !ok || c.principal == nil {
		return nil
	}
	var err error
	switch {
	case c.startErr != nil:
		err = c.startErr
	case c.started != nil:
		err = c.started.Wait(context.WithoutCancel(ctx))
	default:
		err = a.Start(context.WithoutCancel(ctx), c.streamStart())
	}
	if err != nil {
		c.p.log.Error("audit stream start failed; the stream is refused", "request_id", c.id, "err", err)
		e := Internal(err)
		e.Logged = true
		return e
	}
	return nil
}

// beginStart begins the stream's start (StreamStarter) so that it syncs
// while the engine is asked; Start then waits for it. Once begun, the
// call's event waits for it too (Record): an event that overtook its
// start would leave the start's marker open.
func (c *Call) beginStart(ctx context.Context) {
	a, ok := c.p.cfg.Audit.(StreamStarter)
	if !ok || !c.stream || c.principal == nil || c.started != nil || c.startErr != nil {
		return
	}
	c.started, c.startErr = a.BeginStart(context.WithoutCancel(ctx), c.streamStart())
}

// streamStart is what the audit log keeps of the call at its stream's
// start.
func (c *Call) streamStart() auditlog.StreamStart {
	return auditlog.StreamStart{
		RequestID:        c.id,
		TenantID:         c.principal.TenantID,
		KeyID:            c.principal.KeyID,
		Time:             c.received,
		Endpoint:         c.endpoint,
		Model:            c.Model,
		PromptTokens:     c.PromptTokens,
		PolicyDecisionID: c.decisionID,
		RequestBody:      c.RequestBody,
	}
}

// Finish records a complete response, then settles: used tokens are
// charged once the event is recorded, and nothing when it could not be
// (the caller then gets an internal error, not the reply). A nil used
// settles nothing (a response no engine produced).
func (c *Call) Finish(ctx context.Context, status int, response []byte, used *int64) error {
	err := c.Record(ctx, status, response)
	if used != nil {
		if err != nil {
			c.Settle(0)
		} else {
			c.Settle(*used)
		}
	}
	return err
}

// Abandon ends a call whose client went away before any response: its
// reservation is returned in full and its event recorded with
// StatusClientClosed.
func (c *Call) Abandon(ctx context.Context) {
	c.Settle(0)
	_ = c.Record(ctx, StatusClientClosed, nil)
}

// startSpan starts the span of one of the call's steps, a child of ctx's
// span, the request's.
// Without tracing it is ctx itself and a span that records nothing: not
// even the no-op tracer's context is made.
func (c *Call) startSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	return c.p.startSpan(ctx, name, c)
}

// endEngine ends the engine's span, if open: err is the reply's failure.
func (c *Call) endEngine(err error) {
	if c.engine == nil {
		return
	}
	if err != nil {
		c.engine.SetStatus(codes.Error, "engine failed")
	}
	c.engine.End()
	c.engine = nil
}

// AddTokens adds two token counts, saturating at the int64 limits instead
// of wrapping: a sum too large for an int64 stays too large.
func AddTokens(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}
