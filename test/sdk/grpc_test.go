package sdk_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/grpcserver"
)

// The gRPC InferenceService is governed exactly as the HTTP edge: these
// tests call it as an internal service does, over a real connection to a
// running appliance.

func inferenceClient(t *testing.T, addr string) inferencev1.InferenceServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return inferencev1.NewInferenceServiceClient(conn)
}

func withKey(key string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+key)
}

func userChat(model, text string) *inferencev1.ChatCompletionRequest {
	return &inferencev1.ChatCompletionRequest{Model: model, Messages: []*inferencev1.Message{
		{Role: inferencev1.Role_ROLE_USER, Content: &inferencev1.Message_Text{Text: text}},
	}}
}

// chatOnce streams a chat completion to its end and returns the events,
// the header metadata and the call's final error.
func chatOnce(ctx context.Context, cli inferencev1.InferenceServiceClient, req *inferencev1.ChatCompletionRequest) ([]*inferencev1.ChatCompletionResponse, metadata.MD, error) {
	var header metadata.MD
	stream, err := cli.ChatCompletion(ctx, req, grpc.Header(&header))
	if err != nil {
		return nil, header, err
	}
	var events []*inferencev1.ChatCompletionResponse
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return events, header, nil
		}
		if err != nil {
			return events, header, err
		}
		events = append(events, ev)
	}
}

// errorInfo is the ErrorInfo of a status error; the test fails without one.
func errorInfo(t *testing.T, err error) (*status.Status, *errdetails.ErrorInfo) {
	t.Helper()
	st := status.Convert(err)
	info := grpcserver.ErrorInfo(st)
	if info == nil {
		t.Fatalf("status %v carries no ErrorInfo of %s", st, grpcserver.ErrorDomain)
	}
	if !strings.HasPrefix(info.GetMetadata()["request_id"], "req_") {
		t.Fatalf("ErrorInfo %v has no request_id", info)
	}
	return st, info
}

// Every RPC without a valid key (none, unknown, revoked, expired, or a
// scheme other than Bearer) is UNAUTHENTICATED with reason unauthorized,
// and nothing is served.
func TestGRPCRefusesCallsWithoutAValidKey(t *testing.T) {
	s := startStack(t)
	cli := inferenceClient(t, s.grpc)
	creds := map[string]context.Context{
		"none":    context.Background(),
		"unknown": withKey("tgk_test_nobody"),
		"revoked": withKey("tgk_test_acme_revoked"),
		"expired": withKey("tgk_test_acme_expired"),
		"basic":   metadata.AppendToOutgoingContext(context.Background(), "authorization", "Basic "+allKey),
	}
	calls := map[string]func(ctx context.Context) error{
		"ListModels": func(ctx context.Context) error {
			_, err := cli.ListModels(ctx, &inferencev1.ListModelsRequest{})
			return err
		},
		"ChatCompletion": func(ctx context.Context) error {
			events, _, err := chatOnce(ctx, cli, userChat("builtin/echo", "hi"))
			if len(events) > 0 {
				t.Errorf("%d events served without a key", len(events))
			}
			return err
		},
		"Embed": func(ctx context.Context) error {
			_, err := cli.Embed(ctx, &inferencev1.EmbedRequest{Model: "builtin/embed",
				Inputs: []*inferencev1.EmbedInput{{Input: &inferencev1.EmbedInput_Text{Text: "x"}}}})
			return err
		},
		"CountTokens": func(ctx context.Context) error {
			_, err := cli.CountTokens(ctx, &inferencev1.CountTokensRequest{Model: "builtin/echo", Messages: userChat("", "hi").Messages})
			return err
		},
	}
	for method, call := range calls {
		for cred, ctx := range creds {
			t.Run(method+"/"+cred, func(t *testing.T) {
				err := call(ctx)
				st, info := errorInfo(t, err)
				if st.Code() != codes.Unauthenticated || info.GetReason() != "unauthorized" {
					t.Fatalf("got %v (reason %q), want UNAUTHENTICATED unauthorized", st, info.GetReason())
				}
			})
		}
	}
}

// A streamed chat over gRPC is served under the key, carries its request
// id and the key's limits as header metadata, and is an audit event like
// an HTTP request's: the endpoint names the method, request_sha256 covers
// the request's deterministic encoding, response_sha256 the messages as
// gRPC frames them.
func TestGRPCChatIsGovernedAndAudited(t *testing.T) {
	s := startStack(t)
	cli := inferenceClient(t, s.grpc)
	req := userChat("builtin/echo", "hello over gRPC")
	events, header, err := chatOnce(withKey(allKey), cli, req)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, ev := range events {
		text.WriteString(ev.GetContent())
	}
	last := events[len(events)-1]
	if text.String() != "hello over gRPC" || last.GetFinishReason() != inferencev1.FinishReason_FINISH_REASON_STOP || last.GetUsage().GetCompletionTokens() == 0 {
		t.Fatalf("reply %q, last event %v", text.String(), last)
	}
	id := first(header.Get("x-request-id"))
	if !strings.HasPrefix(id, "req_") || first(header.Get("x-ratelimit-limit-requests")) != "100000" {
		t.Fatalf("header metadata %v", header)
	}
	rec, err := s.audit.Event(id)
	if err != nil {
		t.Fatalf("no audit event for %s: %v", id, err)
	}
	l := rec.Leaf
	if l.Endpoint != inferencev1.InferenceService_ChatCompletion_FullMethodName || l.Status != http.StatusOK || l.Model != "builtin/echo" ||
		l.CompletionTokens != last.GetUsage().GetCompletionTokens() || !strings.HasPrefix(l.PolicyDecisionID, "dec_") {
		t.Fatalf("leaf %+v", l)
	}
	body, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var frames []byte
	for _, ev := range events {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		frames = binary.BigEndian.AppendUint32(append(frames, 0), uint32(len(b)))
		frames = append(frames, b...)
	}
	if l.RequestSHA256 != sha256Hex(body) || l.ResponseSHA256 != sha256Hex(frames) {
		t.Fatalf("leaf hashes %s %s, want %s %s", l.RequestSHA256, l.ResponseSHA256, sha256Hex(body), sha256Hex(frames))
	}
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// Each refusal is the spec's: the gRPC code, ErrorInfo's reason, and its
// details; those of a known key are audit events with the HTTP status of
// their kind.
func TestGRPCRefusals(t *testing.T) {
	s := startStack(t)
	cli := inferenceClient(t, s.grpc)
	tool := func(name string) *inferencev1.Tool {
		return &inferencev1.Tool{Name: name, ParametersJson: `{"type":"object"}`}
	}
	denied := userChat("builtin/echo", "/tool delete_database {}")
	denied.Tools = []*inferencev1.Tool{tool("get_weather"), tool("delete_database")}
	big := int64(1000)
	overDay := userChat("builtin/echo", "hi")
	overDay.MaxTokens = &big
	for _, tc := range []struct {
		name       string
		key        string
		req        *inferencev1.ChatCompletionRequest
		code       codes.Code
		reason     string
		httpStatus int
		check      func(t *testing.T, st *status.Status, info *errdetails.ErrorInfo, header metadata.MD)
	}{
		{"policy", allKey, denied, codes.PermissionDenied, "policy_denied", http.StatusForbidden,
			func(t *testing.T, st *status.Status, info *errdetails.ErrorInfo, _ metadata.MD) {
				if !strings.HasPrefix(info.GetMetadata()["policy_decision_id"], "dec_") || !strings.Contains(st.Message(), "delete_database") {
					t.Errorf("denial %v %v", st.Message(), info)
				}
			}},
		{"model", allKey, userChat("builtin/no-such-model", "hi"), codes.Unavailable, "model_unavailable", http.StatusServiceUnavailable, nil},
		{"model scope", "tgk_test_acme_echo_only", userChat("builtin/embed", "hi"), codes.PermissionDenied, "policy_denied", http.StatusForbidden, nil},
		{"invalid", allKey, &inferencev1.ChatCompletionRequest{Model: "builtin/echo"}, codes.InvalidArgument, "invalid_request", http.StatusBadRequest,
			func(t *testing.T, st *status.Status, _ *errdetails.ErrorInfo, _ metadata.MD) {
				for _, d := range st.Details() {
					if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 && br.GetFieldViolations()[0].GetField() == "messages" {
						return
					}
				}
				t.Errorf("no BadRequest naming messages in %v", st.Details())
			}},
		{"tpd", "tgk_test_acme_small_day", overDay, codes.ResourceExhausted, "rate_limited", http.StatusTooManyRequests,
			func(t *testing.T, st *status.Status, _ *errdetails.ErrorInfo, header metadata.MD) {
				var retry *errdetails.RetryInfo
				for _, d := range st.Details() {
					if r, ok := d.(*errdetails.RetryInfo); ok {
						retry = r
					}
				}
				if retry == nil || retry.GetRetryDelay().AsDuration() <= 0 {
					t.Errorf("no RetryInfo in %v", st.Details())
				}
				if first(header.Get("x-ratelimit-limit-tokens")) != "64" || first(header.Get("retry-after")) == "" {
					t.Errorf("header metadata %v", header)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events, header, err := chatOnce(withKey(tc.key), cli, tc.req)
			if len(events) > 0 {
				t.Fatalf("%d events served", len(events))
			}
			st, info := errorInfo(t, err)
			if st.Code() != tc.code || info.GetReason() != tc.reason {
				t.Fatalf("got %v (reason %q), want %v %s", st, info.GetReason(), tc.code, tc.reason)
			}
			if tc.check != nil {
				tc.check(t, st, info, header)
			}
			id := info.GetMetadata()["request_id"]
			if got := first(header.Get("x-request-id")); got != "" && got != id {
				t.Errorf("x-request-id %s, ErrorInfo's %s", got, id)
			}
			rec, err := s.audit.Event(id)
			if err != nil {
				t.Fatalf("refusal %s has no audit event: %v", id, err)
			}
			if rec.Leaf.Status != tc.httpStatus || rec.Leaf.Endpoint != inferencev1.InferenceService_ChatCompletion_FullMethodName {
				t.Fatalf("leaf %+v", rec.Leaf)
			}
			if dec := info.GetMetadata()["policy_decision_id"]; dec != "" && rec.Leaf.PolicyDecisionID != dec {
				t.Fatalf("leaf decision %s, status's %s", rec.Leaf.PolicyDecisionID, dec)
			}
		})
	}
}

// Models, embeddings and token counts over gRPC, under the key's scopes.
func TestGRPCUnaryCalls(t *testing.T) {
	s := startStack(t)
	cli := inferenceClient(t, s.grpc)
	var header metadata.MD
	models, err := cli.ListModels(withKey("tgk_test_acme_echo_only"), &inferencev1.ListModelsRequest{}, grpc.Header(&header))
	if err != nil {
		t.Fatal(err)
	}
	if len(models.GetModels()) != 1 || models.GetModels()[0].GetId() != "builtin/echo" {
		t.Fatalf("echo-only key lists %v", models.GetModels())
	}
	if rec, err := s.audit.Event(first(header.Get("x-request-id"))); err != nil || rec.Leaf.Endpoint != inferencev1.InferenceService_ListModels_FullMethodName {
		t.Fatalf("models event %+v, %v", rec.Leaf, err)
	}
	emb, err := cli.Embed(withKey(allKey), &inferencev1.EmbedRequest{Model: "builtin/embed",
		Inputs: []*inferencev1.EmbedInput{{Input: &inferencev1.EmbedInput_Text{Text: "hello"}}}}, grpc.Header(&header))
	if err != nil {
		t.Fatal(err)
	}
	if len(emb.GetEmbeddings()) != 1 || emb.GetUsage().GetPromptTokens() == 0 {
		t.Fatalf("embeddings %v", emb)
	}
	if rec, err := s.audit.Event(first(header.Get("x-request-id"))); err != nil || rec.Leaf.PromptTokens != emb.GetUsage().GetPromptTokens() {
		t.Fatalf("embed event %+v, %v", rec.Leaf, err)
	}
	count, err := cli.CountTokens(withKey(allKey), &inferencev1.CountTokensRequest{Model: "builtin/echo", Messages: userChat("", "one two three").Messages})
	if err != nil || count.GetPromptTokens() == 0 {
		t.Fatalf("count %v, %v", count, err)
	}
}

// One key's RPM is shared exactly by its HTTP and gRPC calls: 4 of each
// at once against an RPM of 5 admit exactly 5.
func TestHTTPAndGRPCShareRPM(t *testing.T) {
	startInOneMinute(t)
	s := startStack(t)
	const key = "tgk_test_acme_rpm_five"
	cli := inferenceClient(t, s.grpc)
	var admitted, limited atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			var limitedHere bool
			if i%2 == 0 {
				_, err = client(s.base, key).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
					Model: "builtin/echo", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
				})
				var apiErr *openai.Error
				limitedHere = errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusTooManyRequests
			} else {
				_, _, err = chatOnce(withKey(key), cli, userChat("builtin/echo", "hi"))
				limitedHere = status.Code(err) == codes.ResourceExhausted
			}
			switch {
			case err == nil:
				admitted.Add(1)
			case limitedHere:
				limited.Add(1)
			default:
				t.Errorf("call %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if admitted.Load() != 5 || limited.Load() != 3 {
		t.Fatalf("admitted %d, limited %d; want exactly 5 and 3", admitted.Load(), limited.Load())
	}
}
