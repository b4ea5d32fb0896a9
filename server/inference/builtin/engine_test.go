package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
)

func user(text string) *inferencev1.Message {
	return &inferencev1.Message{Role: inferencev1.Role_ROLE_USER, Content: &inferencev1.Message_Text{Text: text}}
}

func collect(t *testing.T, e *Engine, req *inferencev1.ChatCompletionRequest) []*inferencev1.ChatCompletionResponse {
	t.Helper()
	var out []*inferencev1.ChatCompletionResponse
	if err := e.ChatCompletion(context.Background(), req, func(r *inferencev1.ChatCompletionResponse) error {
		out = append(out, r)
		return nil
	}); err != nil {
		t.Fatalf("ChatCompletion: %v", err)
	}
	return out
}

func TestCountTokens(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"", 0}, {"   ", 0}, {"a", 1}, {"hello world", 2}, {"  lead and trail  ", 3},
		{"tabs\tand\nnewlines", 3}, {"naïve café", 2}, {"a\u00a0b", 2}, // NBSP is whitespace
	} {
		if got := CountTokens(tc.in); got != tc.want {
			t.Errorf("CountTokens(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestPieces(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"hello", []string{"hello"}},
		{"hello big world", []string{"hello ", "big ", "world"}},
		{"a  b\n\nc ", []string{"a  ", "b\n\n", "c "}},
		{"  lead", []string{"  lead"}},
	} {
		got := pieces(tc.in)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
			t.Errorf("pieces(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Join(got, "") != tc.in {
			t.Errorf("pieces(%q) do not concatenate back", tc.in)
		}
	}
}

func TestEcho(t *testing.T) {
	maxTok := func(n int64) *int64 { return &n }
	parts := &inferencev1.Message{Role: inferencev1.Role_ROLE_USER, Content: &inferencev1.Message_Parts{Parts: &inferencev1.ContentParts{
		Parts: []*inferencev1.ContentPart{{Text: "one two"}, {Text: "three"}},
	}}}
	for _, tc := range []struct {
		name       string
		req        *inferencev1.ChatCompletionRequest
		wantPieces []string
		wantFinish inferencev1.FinishReason
		wantUsage  [2]int64
	}{
		{
			name: "last user message",
			req: &inferencev1.ChatCompletionRequest{Model: EchoModel, Messages: []*inferencev1.Message{
				{Role: inferencev1.Role_ROLE_SYSTEM, Content: &inferencev1.Message_Text{Text: "be brief"}},
				user("first"), {Role: inferencev1.Role_ROLE_ASSISTANT, Content: &inferencev1.Message_Text{Text: "ok"}},
				user("hello big world"),
			}},
			wantPieces: []string{"hello ", "big ", "world"},
			wantFinish: inferencev1.FinishReason_FINISH_REASON_STOP,
			wantUsage:  [2]int64{7, 3},
		},
		{
			name:       "text parts joined by newline",
			req:        &inferencev1.ChatCompletionRequest{Model: EchoModel, Messages: []*inferencev1.Message{parts}},
			wantPieces: []string{"one ", "two\n", "three"},
			wantFinish: inferencev1.FinishReason_FINISH_REASON_STOP,
			wantUsage:  [2]int64{3, 3},
		},
		{
			name:       "max_tokens cuts with length",
			req:        &inferencev1.ChatCompletionRequest{Model: EchoModel, MaxTokens: maxTok(2), Messages: []*inferencev1.Message{user("a b c d")}},
			wantPieces: []string{"a ", "b"},
			wantFinish: inferencev1.FinishReason_FINISH_REASON_LENGTH,
			wantUsage:  [2]int64{4, 2},
		},
		{
			name:       "the model's limit cuts a reply without max_tokens",
			req:        &inferencev1.ChatCompletionRequest{Model: EchoModel, Messages: []*inferencev1.Message{user(strings.Repeat("w ", EchoMaxOutputTokens+5))}},
			wantPieces: append(slices.Repeat([]string{"w "}, EchoMaxOutputTokens-1), "w"),
			wantFinish: inferencev1.FinishReason_FINISH_REASON_LENGTH,
			wantUsage:  [2]int64{EchoMaxOutputTokens + 5, EchoMaxOutputTokens},
		},
		{
			name:       "the model's limit wins over a larger max_tokens",
			req:        &inferencev1.ChatCompletionRequest{Model: EchoModel, MaxTokens: maxTok(EchoMaxOutputTokens * 4), Messages: []*inferencev1.Message{user(strings.Repeat("w ", EchoMaxOutputTokens+1))}},
			wantPieces: append(slices.Repeat([]string{"w "}, EchoMaxOutputTokens-1), "w"),
			wantFinish: inferencev1.FinishReason_FINISH_REASON_LENGTH,
			wantUsage:  [2]int64{EchoMaxOutputTokens + 1, EchoMaxOutputTokens},
		},
		{
			name:       "a reply of exactly the model's limit is stop",
			req:        &inferencev1.ChatCompletionRequest{Model: EchoModel, Messages: []*inferencev1.Message{user(strings.TrimSpace(strings.Repeat("w ", EchoMaxOutputTokens)))}},
			wantPieces: append(slices.Repeat([]string{"w "}, EchoMaxOutputTokens-1), "w"),
			wantFinish: inferencev1.FinishReason_FINISH_REASON_STOP,
			wantUsage:  [2]int64{EchoMaxOutputTokens, EchoMaxOutputTokens},
		},
		{
			name:       "max_tokens equal to reply is stop",
			req:        &inferencev1.ChatCompletionRequest{Model: EchoModel, MaxTokens: maxTok(2), Messages: []*inferencev1.Message{user("a b")}},
			wantPieces: []string{"a ", "b"},
			wantFinish: inferencev1.FinishReason_FINISH_REASON_STOP,
			wantUsage:  [2]int64{2, 2},
		},
		{
			name: "tool result",
			req: &inferencev1.ChatCompletionRequest{Model: EchoModel, Messages: []*inferencev1.Message{
				user("/tool get_weather {}"),
				{Role: inferencev1.Role_ROLE_TOOL, ToolCallId: "call_1", Content: &inferencev1.Message_Text{Text: "sunny"}},
			}},
			wantPieces: []string{"tool ", "result: ", "sunny"},
			wantFinish: inferencev1.FinishReason_FINISH_REASON_STOP,
			wantUsage:  [2]int64{4, 3},
		},
		{
			name:       "tool not offered",
			req:        &inferencev1.ChatCompletionRequest{Model: EchoModel, Messages: []*inferencev1.Message{user(`/tool get_weather {"city":"Oslo"}`)}},
			wantPieces: []string{"tool ", "get_weather ", "is ", "not ", "available"},
			wantFinish: inferencev1.FinishReason_FINISH_REASON_STOP,
			wantUsage:  [2]int64{3, 5},
		},
		{
			name: "tool_choice none hides tools",
			req: &inferencev1.ChatCompletionRequest{Model: EchoModel, Messages: []*inferencev1.Message{user(`/tool f {}`)},
				Tools: []*inferencev1.Tool{{Name: "f"}}, ToolChoice: &inferencev1.ToolChoice{Mode: inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_NONE}},
			wantPieces: []string{"tool ", "f ", "is ", "not ", "available"},
			wantFinish: inferencev1.FinishReason_FINISH_REASON_STOP,
			wantUsage:  [2]int64{3, 5},
		},
		{
			name:       "delay text",
			req:        &inferencev1.ChatCompletionRequest{Model: EchoModel, Messages: []*inferencev1.Message{user("/delay 5 slow reply")}},
			wantPieces: []string{"slow ", "reply"},
			wantFinish: inferencev1.FinishReason_FINISH_REASON_STOP,
			wantUsage:  [2]int64{4, 2},
		},
		{
			name:       "no user message",
			req:        &inferencev1.ChatCompletionRequest{Model: EchoModel, Messages: []*inferencev1.Message{{Role: inferencev1.Role_ROLE_SYSTEM, Content: &inferencev1.Message_Text{Text: "x"}}}},
			wantPieces: nil,
			wantFinish: inferencev1.FinishReason_FINISH_REASON_STOP,
			wantUsage:  [2]int64{1, 0},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := New()
			var slept []time.Duration
			e.sleep = func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
			events := collect(t, e, tc.req)
			last := events[len(events)-1]
			var got []string
			for _, ev := range events[:len(events)-1] {
				got = append(got, ev.GetContent())
				if ev.GetFinishReason() != 0 || ev.GetUsage() != nil {
					t.Errorf("piece event carries finish or usage: %v", ev)
				}
			}
			if strings.Join(got, "|") != strings.Join(tc.wantPieces, "|") {
				t.Errorf("pieces = %q, want %q", got, tc.wantPieces)
			}
			if last.GetFinishReason() != tc.wantFinish {
				t.Errorf("finish = %v, want %v", last.GetFinishReason(), tc.wantFinish)
			}
			if u := last.GetUsage(); u.GetPromptTokens() != tc.wantUsage[0] || u.GetCompletionTokens() != tc.wantUsage[1] {
				t.Errorf("usage = %v, want %v", u, tc.wantUsage)
			}
			if strings.HasPrefix(tc.name, "delay") && len(slept) != len(tc.wantPieces) {
				t.Errorf("slept %d times, want once per piece (%d)", len(slept), len(tc.wantPieces))
			}
		})
	}
}

func TestEchoToolCall(t *testing.T) {
	args := `{"city": "Oslo", "unit": "c"}`
	req := &inferencev1.ChatCompletionRequest{
		Model:    EchoModel,
		Messages: []*inferencev1.Message{user("/tool get_weather " + args)},
		Tools:    []*inferencev1.Tool{{Name: "other"}, {Name: "get_weather", ParametersJson: `{"type":"object"}`}},
	}
	events := collect(t, New(), req)
	var id, name, gotArgs string
	fragments := 0
	for _, ev := range events[:len(events)-1] {
		if ev.GetContent() != "" {
			t.Errorf("tool call reply has content %q", ev.GetContent())
		}
		for _, d := range ev.GetToolCalls() {
			if d.GetIndex() != 0 {
				t.Errorf("index %d", d.GetIndex())
			}
			if d.GetId() != "" {
				id, name = d.GetId(), d.GetName()
				continue
			}
			fragments++
			gotArgs += d.GetArguments()
		}
	}
	if !strings.HasPrefix(id, "call_") || name != "get_weather" {
		t.Errorf("first delta id=%q name=%q", id, name)
	}
	if gotArgs != args || fragments < 2 {
		t.Errorf("arguments %q in %d fragments, want %q in >= 2", gotArgs, fragments, args)
	}
	if !json.Valid([]byte(gotArgs)) {
		t.Errorf("arguments not JSON")
	}
	if f := events[len(events)-1].GetFinishReason(); f != inferencev1.FinishReason_FINISH_REASON_TOOL_CALLS {
		t.Errorf("finish = %v", f)
	}
}

func TestDelayHonoursCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e := New()
	n := 0
	// A cancelled context stops the stream before the next piece.
	e.sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	err := e.ChatCompletion(ctx, &inferencev1.ChatCompletionRequest{Model: EchoModel, Messages: []*inferencev1.Message{user("/delay 60000 a b c")}},
		func(*inferencev1.ChatCompletionResponse) error { n++; return nil })
	if !errors.Is(err, context.Canceled) || n != 0 {
		t.Fatalf("err=%v events=%d, want context.Canceled and none", err, n)
	}
}

func TestWrongModels(t *testing.T) {
	e := New()
	err := e.ChatCompletion(context.Background(), &inferencev1.ChatCompletionRequest{Model: EmbedModel}, nil)
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("chat on embed model: %v", err)
	}
	err = e.ChatCompletion(context.Background(), &inferencev1.ChatCompletionRequest{Model: "builtin/nope"}, nil)
	if status.Code(err) != codes.NotFound {
		t.Errorf("chat on unknown model: %v", err)
	}
	if _, err := e.Embed(context.Background(), &inferencev1.EmbedRequest{Model: EchoModel}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("embed on chat model: %v", err)
	}
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func TestEmbed(t *testing.T) {
	e := New()
	resp, err := e.Embed(context.Background(), &inferencev1.EmbedRequest{Model: EmbedModel, Inputs: []*inferencev1.EmbedInput{
		{Input: &inferencev1.EmbedInput_Text{Text: "Hello world"}},
		{Input: &inferencev1.EmbedInput_Text{Text: "hello WORLD"}},
		{Input: &inferencev1.EmbedInput_Tokens{Tokens: &inferencev1.TokenIDs{Ids: []int64{1, 2, 3}}}},
		{Input: &inferencev1.EmbedInput_Text{Text: ""}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetUsage().GetPromptTokens(); got != 2+2+3 {
		t.Errorf("prompt tokens = %d, want 7", got)
	}
	a, b := resp.Embeddings[0].Values, resp.Embeddings[1].Values
	if len(a) != 256 || math.Abs(norm(a)-1) > 1e-6 {
		t.Errorf("len %d norm %f", len(a), norm(a))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("lowercasing: vectors differ at %d", i)
		}
	}
	if norm(resp.Embeddings[3].Values) != 0 {
		t.Errorf("empty text is not the zero vector")
	}
	// Golden: "abc" is the single 3-gram; FNV-1a-32("abc") = 0x1a47e90b,
	// bit 31 clear, bucket 0x1a47e90b % 256 = 11.
	v := Vector("ABC", 256)
	if v[11] != 1 || norm(v) != 1 {
		t.Errorf("golden vector: v[11]=%v norm=%v", v[11], norm(v))
	}

	short, err := e.Embed(context.Background(), &inferencev1.EmbedRequest{Model: EmbedModel, Dimensions: 8,
		Inputs: []*inferencev1.EmbedInput{{Input: &inferencev1.EmbedInput_Text{Text: "the quick brown fox"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if s := short.Embeddings[0].Values; len(s) != 8 || math.Abs(norm(s)-1) > 1e-6 {
		t.Errorf("dimensions 8: len %d norm %f", len(s), norm(s))
	}
	if _, err := e.Embed(context.Background(), &inferencev1.EmbedRequest{Model: EmbedModel, Dimensions: 257,
		Inputs: []*inferencev1.EmbedInput{{Input: &inferencev1.EmbedInput_Text{Text: "x"}}}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("dimensions 257: %v", err)
	}
}

func BenchmarkCountTokens(b *testing.B) {
	s := strings.Repeat("the quick brown fox jumps over the lazy dog ", 20)
	b.ReportAllocs()
	for b.Loop() {
		CountTokens(s)
	}
}

// max_tokens bounds a tool call as it bounds text: the arguments are cut
// and the finish is length, so the usage never passes what the request
// allowed (and a key's limits reserved).
func TestToolCallCutAtMaxTokens(t *testing.T) {
	args := `{"text": "` + strings.Repeat("word ", 100) + `"}`
	maxTokens := int64(5)
	req := &inferencev1.ChatCompletionRequest{
		Model:     EchoModel,
		Messages:  []*inferencev1.Message{user("/tool get_weather " + args)},
		Tools:     []*inferencev1.Tool{{Name: "get_weather", ParametersJson: `{"type":"object"}`}},
		MaxTokens: &maxTokens,
	}
	events := collect(t, New(), req)
	var got string
	for _, ev := range events[:len(events)-1] {
		for _, d := range ev.GetToolCalls() {
			got += d.GetArguments()
		}
	}
	last := events[len(events)-1]
	if last.GetFinishReason() != inferencev1.FinishReason_FINISH_REASON_LENGTH || last.GetUsage().GetCompletionTokens() > maxTokens {
		t.Fatalf("finish %v, %d completion tokens; want length and at most %d", last.GetFinishReason(), last.GetUsage().GetCompletionTokens(), maxTokens)
	}
	if got == "" || !strings.HasPrefix(args, got) || 1+CountTokens(got) != last.GetUsage().GetCompletionTokens() {
		t.Fatalf("arguments %q (usage %d), want a prefix of the asked ones counted in the usage", got, last.GetUsage().GetCompletionTokens())
	}
}

// /delay waits at most maxDelay in all, however many pieces and however
// large the number (no overflow to no wait), and a Unicode space after
// the command counts as one.
func TestDelayBoundedInAll(t *testing.T) {
	for _, c := range []struct{ msg string }{
		{"/delay 60000" + strings.Repeat(" word", 10)},
		{"/delay 9223372036855" + strings.Repeat(" word", 10)},
		{"/delay\u00a060000" + strings.Repeat(" word", 10)},
	} {
		e := New()
		var slept time.Duration
		e.sleep = func(_ context.Context, d time.Duration) error { slept += d; return nil }
		collect(t, e, &inferencev1.ChatCompletionRequest{Model: EchoModel, Messages: []*inferencev1.Message{user(c.msg)}})
		if slept != maxDelay {
			t.Errorf("%q: waited %s in all, want %s", c.msg, slept, maxDelay)
		}
	}
}
