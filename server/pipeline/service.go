package pipeline

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/grpcserver"
	"github.com/tollgate-dev/tollgate/internal/ids"
	"github.com/tollgate-dev/tollgate/server/keys"
)

// Service is the appliance's gRPC InferenceService: every call is a
// governed call of the pipeline, exactly as an HTTP request is. The
// virtual key travels as `authorization: Bearer <key>` metadata; the
// call's request id is its x-request-id header metadata (given by the
// grpcserver interceptor), and the x-ratelimit-* values of a limited key
// are header metadata too. A refusal is the status of its Kind
// (Kind.GRPCCode) with an ErrorInfo whose reason is the spec's error code
// and whose metadata holds request_id (and policy_decision_id for a
// denial); a refusal by the limits adds a google.rpc.RetryInfo, a bad
// request a google.rpc.BadRequest.
//
// Every call of a known key is an audit event whose endpoint is the gRPC
// method's full name. request_sha256 covers the request message's
// deterministic protobuf encoding as received; response_sha256 covers
// each message sent, then (for a call that ended with an error) the
// google.rpc.Status it ended with, each framed as a gRPC message is on the
// wire: a zero byte, a 4-byte big-endian length, the deterministic
// encoding (docs/grpc.md). The status recorded is the HTTP status of the
// call's outcome (200, or Kind.Status(); 499 when the caller cancelled).
type Service struct {
	inferencev1.UnimplementedInferenceServiceServer
	p         *Pipeline
	validator *grpcserver.Validator
	slots     chan struct{} // one per call in flight
}

var _ grpcserver.SelfValidating = (*Service)(nil)

// DefaultMaxInFlight bounds the calls a Service serves at once when
// NewService is given 0, as the HTTP edge bounds its requests.
const DefaultMaxInFlight = 4096

// NewService returns the governed InferenceService over p, serving at most
// maxInFlight calls at once (0: DefaultMaxInFlight); one more is
// UNAVAILABLE (service_unavailable) before its key is looked at, and not
// recorded, as an HTTP request past the edge's bound is.
func NewService(p *Pipeline, maxInFlight int) *Service {
	v := grpcserver.NewValidator()
	if maxInFlight <= 0 {
		maxInFlight = DefaultMaxInFlight
	}
	return &Service{p: p, validator: v, slots: make(chan struct{}, maxInFlight)}
}

// InFlight is the calls being served.
func (s *Service) InFlight() int { return len(s.slots) }

// acquire takes a slot for a call, or refuses it.
func (s *Service) acquire(ctx context.Context) (release func(), err error) {
	select {
	case s.slots <- struct{}{}:
		return func() { <-s.slots }, nil
	default:
		_ = grpc.SetHeader(ctx, metadata.Pairs("retry-after", "1"))
		return nil, grpcserver.Error(ctx, codes.Unavailable, CodeUnavailable,
			fmt.Sprintf("the gateway is serving its limit of %d gRPC calls at once; retry shortly", cap(s.slots)), nil)
	}
}

// ValidatesItself marks the service as one that validates its requests
// after authentication, so that a bad request of a known key is recorded.
func (s *Service) ValidatesItself() {}

// rpcCall is one gRPC call of the pipeline: the call, and the bytes its
// audit event covers.
type rpcCall struct {
	*Call
	setHeader func(metadata.MD) error
	// setTrailer, set for a streaming method, sets trailer metadata: the
	// receipt goes there, the headers having gone with the first message.
	setTrailer func(metadata.MD)
	response   []byte // the framed messages sent
	sent       int    // messages sent
	headers    bool   // x-ratelimit-* header metadata set
}

// begin authenticates a call and validates its request. A call without a
// valid key is refused before anything else and not recorded (it belongs
// to no tenant); an invalid request of a known key is recorded.
func (s *Service) begin(ctx context.Context, method string, req proto.Message, setHeader func(metadata.MD) error) (*rpcCall, error) {
	id := grpcserver.RequestID(ctx)
	if id == "" {
		id = ids.NewRequest()
	}
	received := s.p.Now()
	principal, err := s.authenticate(ctx, id)
	if err != nil {
		e := AsError(err)
		if e.Kind == KindUnauthorized {
			s.p.log.Warn("unauthenticated gRPC call", "request_id", id, "method", method)
		} else {
			s.p.log.Error("authenticator failed", "request_id", id, "err", err)
		}
		return nil, rpcStatus(ctx, e)
	}
	body, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	if err != nil {
		return nil, grpcserver.Error(ctx, codes.Internal, CodeInternal, "internal error", nil)
	}
	c := &rpcCall{Call: s.p.Begin(id, method, principal, received), setHeader: setHeader}
	c.RequestBody = body
	if err := s.validator.Check(ctx, req); err != nil {
		if m, ok := req.(interface{ GetModel() string }); ok {
			c.Model = m.GetModel()
		}
		return nil, c.end(ctx, err)
	}
	c.validated = true
	return c, nil
}

// authenticate resolves the call's key under an "authenticate" span, and
// names the key (never its secret) and the request on the call's span.
func (s *Service) authenticate(ctx context.Context, id string) (*keys.Principal, error) {
	_, span := s.p.StartSpan(ctx, "authenticate")
	principal, err := s.p.Authenticate(bearer(ctx))
	if err != nil {
		span.SetStatus(otelcodes.Error, "unauthenticated")
	}
	span.End()
	if call := trace.SpanFromContext(ctx); call.IsRecording() {
		call.SetAttributes(attribute.String("tollgate.request_id", id))
		if err == nil {
			call.SetAttributes(attribute.String("tollgate.tenant_id", principal.TenantID), attribute.String("tollgate.key_id", principal.KeyID))
		}
	}
	return principal, err
}

// bearer is the call's one `authorization: Bearer <secret>` metadata, or
// "" when it has none, several, or another scheme.
func bearer(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	auth := md.Get("authorization")
	if len(auth) != 1 {
		return ""
	}
	scheme, secret, ok := strings.Cut(auth[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(secret)
}

// limitHeaders sets the x-ratelimit-* header metadata once, before the
// first message or the status.
func (c *rpcCall) limitHeaders() {
	if c.headers {
		return
	}
	c.headers = true
	st, ok := c.RateLimit()
	if !ok {
		return
	}
	h := http.Header{}
	st.SetHeaders(h)
	md := metadata.MD{}
	for k, v := range h {
		md[strings.ToLower(k)] = v
	}
	if len(md) > 0 {
		_ = c.setHeader(md)
	}
}

// frame appends m to the response bytes as gRPC frames it.
func (c *rpcCall) frame(m proto.Message) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return // a message that cannot be encoded is not sent either
	}
	c.response = append(c.response, 0)
	c.response = binary.BigEndian.AppendUint32(c.response, uint32(len(b)))
	c.response = append(c.response, b...)
}

// sentMessage records a message as sent.
func (c *rpcCall) sentMessage(m proto.Message) {
	c.frame(m)
	c.sent++
}

// end finishes a call that failed with err (an *Error of the pipeline, or
// a status already made): a caller that went away is recorded as 499
// with what it was sent; otherwise the status is recorded with the
// response and returned. The reservation is returned in full when nothing
// was sent, and kept when part of a reply was (its true usage is unknown).
func (c *rpcCall) end(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		if c.sent == 0 {
			c.Settle(0)
		}
		_ = c.Record(ctx, StatusClientClosed, c.response)
		return status.FromContextError(ctx.Err()).Err()
	}
	st, ok := status.FromError(err)
	httpStatus := http.StatusBadRequest
	if !ok || st.Code() != codes.InvalidArgument {
		e := AsError(err)
		if e.Kind == KindInternal && !e.Logged {
			c.p.log.Warn("internal call failed", "request_id", c.id, "err", err)
		}
		st = status.Convert(rpcStatus(ctx, e))
		httpStatus = e.Kind.Status()
	}
	if c.sent == 0 {
		c.Settle(0)
	}
	c.limitHeaders()
	c.frame(st.Proto())
	if rerr := c.Record(ctx, httpStatus, c.response); rerr != nil {
		return recordFailed(ctx, rerr)
	}
	c.sendReceipt()
	return st.Err()
}

// finish records a call that succeeded, then settles used tokens (nil:
// none). The caller sees its OK status only once the event is durable.
func (c *rpcCall) finish(ctx context.Context, used *int64) error {
	c.limitHeaders()
	if err := c.Finish(ctx, http.StatusOK, c.response, used); err != nil {
		return recordFailed(ctx, err)
	}
	c.sendReceipt()
	return nil
}

// sendReceipt sends the recorded event's receipt as x-tollgate-receipt:
// header metadata of a unary call, which go with its reply; trailer
// metadata of a stream, which go with its status once the event is
// durable.
func (c *rpcCall) sendReceipt() {
	v := c.ReceiptHeaderValue()
	if v == "" {
		return
	}
	md := metadata.Pairs(ReceiptHeader, v)
	if c.setTrailer != nil {
		c.setTrailer(md)
		return
	}
	_ = c.setHeader(md)
}

// rpcStatus is the gRPC status of a pipeline error.
func rpcStatus(ctx context.Context, e *Error) error {
	var md map[string]string
	var details []protoadapt.MessageV1
	switch e.Kind {
	case KindPolicyDenied:
		md = map[string]string{grpcserver.MetadataDecisionID: e.DecisionID}
	case KindRateLimited:
		retry := e.RetryAfter()
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(retry)})
		_ = grpc.SetHeader(ctx, metadata.Pairs("retry-after", strconv.FormatInt(int64((retry+999_999_999)/1_000_000_000), 10)))
	case KindInvalid:
		details = append(details, &errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
			{Field: e.Param, Description: e.Message},
		}})
	}
	return grpcserver.Error(ctx, e.Kind.GRPCCode(), e.Kind.Code(), e.Message, md, details...)
}

// ListModels returns the loaded models the key may use.
func (s *Service) ListModels(ctx context.Context, req *inferencev1.ListModelsRequest) (*inferencev1.ListModelsResponse, error) {
	release, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	c, err := s.begin(ctx, inferencev1.InferenceService_ListModels_FullMethodName, req, unaryHeader(ctx))
	if err != nil {
		return nil, err
	}
	if err := c.DecideModels(ctx); err != nil {
		return nil, c.end(ctx, err)
	}
	if err := c.Admit(ctx, 0); err != nil {
		return nil, c.end(ctx, err)
	}
	models, err := c.Models(ctx)
	if err != nil {
		return nil, c.end(ctx, err)
	}
	resp := &inferencev1.ListModelsResponse{Models: models}
	c.sentMessage(resp)
	if err := c.finish(ctx, nil); err != nil {
		return nil, err
	}
	return resp, nil
}

// Embed returns the engine's embeddings.
func (s *Service) Embed(ctx context.Context, req *inferencev1.EmbedRequest) (*inferencev1.EmbedResponse, error) {
	release, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	c, err := s.begin(ctx, inferencev1.InferenceService_Embed_FullMethodName, req, unaryHeader(ctx))
	if err != nil {
		return nil, err
	}
	c.Model = req.GetModel()
	if err := c.DecideEmbeddings(ctx, req); err != nil {
		return nil, c.end(ctx, err)
	}
	if err := c.ReserveEmbeddings(ctx, req); err != nil {
		return nil, c.end(ctx, err)
	}
	resp, err := c.Embed(ctx, req)
	if err != nil {
		return nil, c.end(ctx, err)
	}
	c.sentMessage(resp)
	used := c.PromptTokens
	if err := c.finish(ctx, &used); err != nil {
		return nil, err
	}
	return resp, nil
}

// CountTokens counts a chat request's prompt tokens. It is decided as the
// chat request it previews and admitted against the key's RPM, reserving
// no tokens (nothing is generated).
func (s *Service) CountTokens(ctx context.Context, req *inferencev1.CountTokensRequest) (*inferencev1.CountTokensResponse, error) {
	release, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	c, err := s.begin(ctx, inferencev1.InferenceService_CountTokens_FullMethodName, req, unaryHeader(ctx))
	if err != nil {
		return nil, err
	}
	c.Model = req.GetModel()
	preview := &inferencev1.ChatCompletionRequest{Model: req.GetModel(), Messages: req.GetMessages(), Tools: req.GetTools(),
		ChatTemplateKwargsJson: req.GetChatTemplateKwargsJson(), ReasoningEffort: req.ReasoningEffort}
	if _, err := c.DecideChat(ctx, preview, ChatOptions{}); err != nil {
		return nil, c.end(ctx, err)
	}
	if err := c.Admit(ctx, 0); err != nil {
		return nil, c.end(ctx, err)
	}
	resp, err := c.p.cfg.Inference.CountTokens(ctx, req)
	if err != nil {
		return nil, c.end(ctx, c.engineError(ctx, "count tokens", err))
	}
	c.PromptTokens = resp.GetPromptTokens()
	c.sentMessage(resp)
	if err := c.finish(ctx, nil); err != nil {
		return nil, err
	}
	return resp, nil
}

// ChatCompletion streams the reply as it is produced. The OK status, the
// stream's end, is sent once the call's event is durable, as the HTTP
// stream's [DONE] is.
func (s *Service) ChatCompletion(req *inferencev1.ChatCompletionRequest, stream grpc.ServerStreamingServer[inferencev1.ChatCompletionResponse]) error {
	ctx := stream.Context()
	release, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	c, err := s.begin(ctx, inferencev1.InferenceService_ChatCompletion_FullMethodName, req, stream.SetHeader)
	if err != nil {
		return err
	}
	c.setTrailer = stream.SetTrailer
	c.Model = req.GetModel()
	filter, err := c.DecideChat(ctx, req, ChatOptions{Stream: true})
	if err != nil {
		return c.end(ctx, err)
	}
	if err := c.ReserveChat(ctx, req); err != nil {
		return c.end(ctx, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reply, ev, err := c.Chat(ctx, req, filter)
	if err != nil {
		return c.end(stream.Context(), err)
	}
	c.limitHeaders()
	if err := c.Start(ctx); err != nil {
		return c.end(stream.Context(), err)
	}
	for {
		if err := stream.Send(ev); err != nil {
			return c.end(stream.Context(), err)
		}
		c.sentMessage(ev)
		if reply.Done() {
			break
		}
		if ev, err = reply.Next(); err != nil {
			e := AsError(err)
			if !e.Logged && stream.Context().Err() == nil {
				c.p.log.Warn("stream failed after it started", "request_id", c.id, "err", err)
				e.Logged = true
			}
			return c.end(stream.Context(), e)
		}
	}
	c.Settle(AddTokens(c.PromptTokens, c.CompletionTokens))
	return c.finish(stream.Context(), nil)
}

// unaryHeader sets header metadata of a unary call.
func unaryHeader(ctx context.Context) func(metadata.MD) error {
	return func(md metadata.MD) error { return grpc.SetHeader(ctx, md) }
}

// recordFailed is the status of a call whose event could not be
// recorded: Unavailable while the audit log's disk is full, Internal
// otherwise.
func recordFailed(ctx context.Context, err error) error {
	if IsAuditFull(err) {
		return grpcserver.Error(ctx, codes.Unavailable, CodeUnavailable, AuditFullMessage, nil)
	}
	return grpcserver.Error(ctx, codes.Internal, CodeInternal, "internal error; retry with backoff", nil)
}
