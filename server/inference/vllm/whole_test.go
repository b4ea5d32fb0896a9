package vllm_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/inference/vllm"
	"github.com/tollgate-dev/tollgate/server/inference/vllm/vllmfake"
)

// folded is a reply put together: what a client taking it whole sees.
type folded struct {
	content, reasoning string
	calls              []string // id, name and arguments of each call
	finish             inferencev1.FinishReason
	prompt, completion int64
}

func fold(t *testing.T, evs []*inferencev1.ChatCompletionResponse) folded {
	t.Helper()
	var f folded
	var content, reasoning strings.Builder
	byIndex := map[int32]int{}
	for i, ev := range evs {
		last := i == len(evs)-1
		if (ev.GetFinishReason() != inferencev1.FinishReason_FINISH_REASON_UNSPECIFIED) != last || (ev.GetUsage() != nil) != last {
			t.Fatalf("event %d of %d: %v", i, len(evs), ev)
		}
		content.WriteString(ev.GetContent())
		reasoning.WriteString(ev.GetReasoning())
		for _, d := range ev.GetToolCalls() {
			j, ok := byIndex[d.GetIndex()]
			if !ok {
				if d.GetId() == "" || d.GetName() == "" {
					t.Fatalf("a call begins without its id or name: %v", d)
				}
				j = len(f.calls)
				byIndex[d.GetIndex()] = j
				f.calls = append(f.calls, d.GetId()+" "+d.GetName()+" ")
			}
			f.calls[j] += d.GetArguments()
		}
		if last {
			f.finish, f.prompt, f.completion = ev.GetFinishReason(), ev.GetUsage().GetPromptTokens(), ev.GetUsage().GetCompletionTokens()
		}
	}
	f.content, f.reasoning = content.String(), reasoning.String()
	return f
}

// A caller that takes the reply whole gets, from the server's whole reply
// (one JSON body, no stream), what the stream would have put together:
// the same text, reasoning, tool calls, finish reason and usage, in at
// most two events. The server is asked without stream or stream options.
func TestWholeReplyMatchesTheStream(t *testing.T) {
	e, srv := newEngine(t, vllm.Config{}, vllmfake.Model{ID: chatID, Reasoning: true})
	tools := []*inferencev1.Tool{{Name: "get_weather", ParametersJson: `{"type":"object"}`}}
	named := &inferencev1.ToolChoice{Mode: inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_FUNCTION, FunctionName: "get_weather"}
	for _, tc := range []struct {
		name string
		req  *inferencev1.ChatCompletionRequest
	}{
		{"text and reasoning", &inferencev1.ChatCompletionRequest{Model: chatMdl, Messages: []*inferencev1.Message{user("hello big world")}}},
		{"length", &inferencev1.ChatCompletionRequest{Model: chatMdl, Messages: []*inferencev1.Message{user("hello big world")}, MaxTokens: proto.Int64(3)}},
		{"tool call", &inferencev1.ChatCompletionRequest{Model: chatMdl, Messages: []*inferencev1.Message{user(`/tool get_weather {"city":"Oslo"}`)}, Tools: tools}},
		{"named tool call", &inferencev1.ChatCompletionRequest{Model: chatMdl, Messages: []*inferencev1.Message{user(`/tool get_weather {"city":"Oslo"}`)}, Tools: tools, ToolChoice: named}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			streamed, err := collect(t, e, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			wholeReq := proto.Clone(tc.req).(*inferencev1.ChatCompletionRequest)
			wholeReq.WholeReply = true
			whole, err := collect(t, e, wholeReq)
			if err != nil {
				t.Fatal(err)
			}
			if len(whole) > 2 {
				t.Errorf("a whole reply in %d events", len(whole))
			}
			sent := srv.Requests("/v1/chat/completions")
			if body := string(sent[len(sent)-1]); !strings.Contains(body, `"stream":false`) || strings.Contains(body, "stream_options") {
				t.Errorf("sent %s", body)
			}
			fs, fw := fold(t, streamed), fold(t, whole)
			// Tool call ids are the server's, new for each completion.
			for i := range fs.calls {
				if i < len(fw.calls) {
					fs.calls[i] = fs.calls[i][strings.Index(fs.calls[i], " "):]
					fw.calls[i] = fw.calls[i][strings.Index(fw.calls[i], " "):]
				}
			}
			if fs.content != fw.content || fs.reasoning != fw.reasoning || strings.Join(fs.calls, "|") != strings.Join(fw.calls, "|") ||
				fs.finish != fw.finish || fs.prompt != fw.prompt || fs.completion != fw.completion {
				t.Fatalf("whole %+v, streamed %+v", fw, fs)
			}
			if fw.content == "" && fw.reasoning == "" && len(fw.calls) == 0 {
				t.Fatalf("an empty reply: %+v", fw)
			}
		})
	}
	// A server from before vLLM's rename sends reasoning_content only.
	srv.SetReasoningField("reasoning_content")
	whole, err := collect(t, e, &inferencev1.ChatCompletionRequest{Model: chatMdl, Messages: []*inferencev1.Message{user("x")}, WholeReply: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := fold(t, whole).reasoning; got != vllmfake.FakeReasoning {
		t.Fatalf("reasoning from reasoning_content: %q", got)
	}
}
