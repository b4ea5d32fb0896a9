package pipeline_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/server/inference"
	"github.com/tollgate-dev/tollgate/server/inference/builtin"
	"github.com/tollgate-dev/tollgate/server/inference/vllm"
	"github.com/tollgate-dev/tollgate/server/inference/vllm/vllmfake"
	"github.com/tollgate-dev/tollgate/server/keys"
	"github.com/tollgate-dev/tollgate/server/limits"
	"github.com/tollgate-dev/tollgate/server/pipeline"
)

// The bound tests run a real limiter on an embedded etcd.
func TestMain(m *testing.M) { etcdtest.Main(m) }

// boundNow is the limiter's clock: one UTC day for every case.
var boundNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// tinyModel is a vLLM model (through the fake) whose context is 64 tokens.
const (
	tinyModel   = "gpu/tiny"
	tinyContext = 128
)

type boundStack struct {
	p      *pipeline.Pipeline
	infer  inferencev1.InferenceServiceClient
	limits *limits.Limiter
}

func newBoundStack(t *testing.T) *boundStack {
	t.Helper()
	fake := vllmfake.Start(t, vllmfake.Model{ID: "tiny", MaxModelLen: tinyContext})
	gpu, err := vllm.New(vllm.Config{URL: fake.URL, Namespace: "gpu"})
	if err != nil {
		t.Fatal(err)
	}
	if err := gpu.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	svc, err := inference.NewService(builtin.New(), gpu)
	if err != nil {
		t.Fatal(err)
	}
	local := inference.NewLocalClient(svc)
	l := limits.New(etcdtest.Client(t), limits.Config{GatewayID: "gw0", Now: func() time.Time { return boundNow }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = l.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return &boundStack{
		p:      pipeline.New(pipeline.Config{Inference: local, Auth: oneKey{}, Limits: l, Now: func() time.Time { return boundNow }}),
		infer:  local,
		limits: l,
	}
}

func words(n int) string { return strings.TrimSpace(strings.Repeat("w ", n)) }

func ptr(n int64) *int64 { return &n }

// Every reply is bounded by the smallest of the request's max_tokens, the
// key's max_output_tokens and the model's own limit, in ReserveChat: the
// engine is asked for exactly that, a key with a TPD reserves the prompt
// plus exactly that, and settling charges the real usage.
func TestReserveChatBoundsTheReply(t *testing.T) {
	s := newBoundStack(t)
	const tpd = 1_000_000
	for i, tc := range []struct {
		name      string
		model     string
		text      string
		maxTokens *int64
		keyMax    int64
		tpd       int64
		// want is the max_tokens the engine is given; -1: the prompt's
		// room in tinyModel's context; nil: none.
		want       *int64
		wantFinish inferencev1.FinishReason
		wantErr    pipeline.Kind
	}{
		{name: "echo without any bound stops at the model's limit", model: builtin.EchoModel, text: words(builtin.EchoMaxOutputTokens + 10),
			want: ptr(builtin.EchoMaxOutputTokens), wantFinish: inferencev1.FinishReason_FINISH_REASON_LENGTH},
		{name: "a max_tokens above the model's limit is lowered to it", model: builtin.EchoModel, text: words(builtin.EchoMaxOutputTokens + 10), maxTokens: ptr(50_000),
			want: ptr(builtin.EchoMaxOutputTokens), wantFinish: inferencev1.FinishReason_FINISH_REASON_LENGTH},
		{name: "the key's maximum bounds a request without max_tokens", model: builtin.EchoModel, text: words(20), keyMax: 5,
			want: ptr(5), wantFinish: inferencev1.FinishReason_FINISH_REASON_LENGTH},
		{name: "the key's maximum lowers a larger max_tokens", model: builtin.EchoModel, text: words(20), keyMax: 5, maxTokens: ptr(100),
			want: ptr(5), wantFinish: inferencev1.FinishReason_FINISH_REASON_LENGTH},
		{name: "a smaller max_tokens stays", model: builtin.EchoModel, text: words(20), keyMax: 5, maxTokens: ptr(3),
			want: ptr(3), wantFinish: inferencev1.FinishReason_FINISH_REASON_LENGTH},
		{name: "a reply under every bound stops", model: builtin.EchoModel, text: words(4), keyMax: 5,
			want: ptr(5), wantFinish: inferencev1.FinishReason_FINISH_REASON_STOP},
		{name: "a TPD without any bound reserves the default", model: builtin.EchoModel, text: words(20), tpd: tpd,
			want: ptr(pipeline.DefaultCompletionReserve), wantFinish: inferencev1.FinishReason_FINISH_REASON_STOP},
		{name: "a TPD reserves the key's maximum", model: builtin.EchoModel, text: words(20), tpd: tpd, keyMax: 7,
			want: ptr(7), wantFinish: inferencev1.FinishReason_FINISH_REASON_LENGTH},
		{name: "a TPD reserves the model's limit below a larger max_tokens", model: builtin.EchoModel, text: words(20), tpd: tpd, maxTokens: ptr(1_000_000),
			want: ptr(builtin.EchoMaxOutputTokens), wantFinish: inferencev1.FinishReason_FINISH_REASON_STOP},
		{name: "vLLM without any bound is left to its context", model: tinyModel, text: words(tinyContext / 2),
			want: nil, wantFinish: inferencev1.FinishReason_FINISH_REASON_LENGTH},
		{name: "vLLM: the key's maximum is lowered to the context's room", model: tinyModel, text: words(tinyContext / 2), keyMax: 1000,
			want: ptr(-1), wantFinish: inferencev1.FinishReason_FINISH_REASON_LENGTH},
		{name: "vLLM: a key's maximum within the room stays", model: tinyModel, text: words(tinyContext / 2), keyMax: 3,
			want: ptr(3), wantFinish: inferencev1.FinishReason_FINISH_REASON_LENGTH},
		{name: "vLLM: a TPD reserves the context's room", model: tinyModel, text: words(tinyContext / 2), tpd: tpd,
			want: ptr(-1), wantFinish: inferencev1.FinishReason_FINISH_REASON_LENGTH},
		{name: "vLLM: the client's own max_tokens past the context is the server's to refuse", model: tinyModel, text: words(tinyContext / 2), maxTokens: ptr(1000),
			want: ptr(1000), wantErr: pipeline.KindInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			pr := keys.NewPrincipal("acme", "key_bound"+string(rune('a'+i)), "bound", true, nil, 0, tc.tpd, nil, time.Time{})
			pr.MaxOutputTokens = tc.keyMax
			msgs := []*inferencev1.Message{{Role: inferencev1.Role_ROLE_USER, Content: &inferencev1.Message_Text{Text: tc.text}}}
			count, err := s.infer.CountTokens(ctx, &inferencev1.CountTokensRequest{Model: tc.model, Messages: msgs})
			if err != nil {
				t.Fatal(err)
			}
			prompt := count.GetPromptTokens()
			want := tc.want
			if want != nil && *want == -1 {
				want = ptr(tinyContext - prompt)
			}

			req := &inferencev1.ChatCompletionRequest{Model: tc.model, Messages: msgs, MaxTokens: tc.maxTokens}
			c := s.p.Begin("req_bound", "/v1/chat/completions", pr, boundNow)
			if err := c.ReserveChat(ctx, req); err != nil {
				t.Fatal(err)
			}
			switch {
			case want == nil && req.MaxTokens != nil:
				t.Fatalf("max_tokens %d, want none", req.GetMaxTokens())
			case want != nil && (req.MaxTokens == nil || req.GetMaxTokens() != *want):
				t.Fatalf("max_tokens %v, want %d", req.MaxTokens, *want)
			}
			if tc.tpd > 0 {
				if st, _ := c.RateLimit(); st.RemainingTokens != tc.tpd-(prompt+*want) {
					t.Fatalf("after admission %d tokens remain, want %d - (%d prompt + %d bound)", st.RemainingTokens, tc.tpd, prompt, *want)
				}
			}

			filter, err := c.DecideChat(ctx, req, pipeline.ChatOptions{})
			if err != nil {
				t.Fatal(err)
			}
			reply, ev, err := c.Chat(ctx, req, filter)
			if tc.wantErr != 0 {
				if e := pipeline.AsError(err); err == nil || e.Kind != tc.wantErr {
					t.Fatalf("chat: %v, want kind %v", err, tc.wantErr)
				}
				c.Settle(0)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for !reply.Done() {
				if ev, err = reply.Next(); err != nil && !errors.Is(err, io.EOF) {
					t.Fatal(err)
				}
			}
			if ev.GetFinishReason() != tc.wantFinish {
				t.Errorf("finish %v, want %v", ev.GetFinishReason(), tc.wantFinish)
			}
			if want != nil && (c.CompletionTokens > *want || (tc.wantFinish == inferencev1.FinishReason_FINISH_REASON_LENGTH && c.CompletionTokens != *want)) {
				t.Errorf("%d completion tokens, bound %d", c.CompletionTokens, *want)
			}
			if want == nil && c.PromptTokens+c.CompletionTokens != tinyContext {
				t.Errorf("%d prompt + %d completion tokens, want the context of %d", c.PromptTokens, c.CompletionTokens, tinyContext)
			}
			used := pipeline.AddTokens(c.PromptTokens, c.CompletionTokens)
			c.Settle(used)
			if tc.tpd > 0 {
				if st := s.limits.Peek(pr); st.RemainingTokens != tc.tpd-used {
					t.Errorf("after settling %d tokens remain, want %d - %d used", st.RemainingTokens, tc.tpd, used)
				}
			}
		})
	}
}

// The gRPC InferenceService bounds a reply as the HTTP edge does: it goes
// through the same ReserveChat.
func TestServiceChatIsBounded(t *testing.T) {
	s := newBoundStack(t)
	pr := keys.NewPrincipal("acme", "key_grpcbound", "grpc", true, nil, 0, 0, nil, time.Time{})
	pr.MaxOutputTokens = 2
	p := pipeline.New(pipeline.Config{Inference: s.infer, Auth: oneKey{pr}})
	cli := serveService(t, p, 4)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer tgk_test")
	stream, err := cli.ChatCompletion(ctx, &inferencev1.ChatCompletionRequest{Model: builtin.EchoModel, MaxTokens: ptr(100),
		Messages: []*inferencev1.Message{{Role: inferencev1.Role_ROLE_USER, Content: &inferencev1.Message_Text{Text: "a b c d"}}}})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	var last *inferencev1.ChatCompletionResponse
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		text.WriteString(ev.GetContent())
		last = ev
	}
	if text.String() != "a b" || last.GetFinishReason() != inferencev1.FinishReason_FINISH_REASON_LENGTH || last.GetUsage().GetCompletionTokens() != 2 {
		t.Fatalf("reply %q, last event %v", text.String(), last)
	}
}
