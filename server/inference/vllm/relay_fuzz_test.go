package vllm_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/inference/vllm"
)

// relaySeeds are model servers' streams: vLLM's as it sends them (content,
// reasoning, tool calls, usage after the finish), its error event, and
// streams broken in the ways a server or a proxy breaks them.
var relaySeeds = []string{
	"data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" world\"},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7}}\n\n" +
		"data: [DONE]\n\n",
	"data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"think\"}}]}\r\n\r\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"more\"}}]}\r\n\r\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]}}]}\r\n\r\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]}}]}\r\n\r\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{}}]},\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":4}}\r\n\r\n" +
		"data: [DONE]",
	": keep-alive\nevent: message\nid: 1\nretry: 10\ndata:{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\ndata:[DONE]\n",
	"data: {\"object\":\"error\",\"message\":\"The model ran out of KV cache\",\"type\":\"InternalServerError\",\"code\":500,\"error\":{\"message\":\"boom\"}}\n\n",
	"data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"x\"}}]}\n\n",
	"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"abort\"}]}\n\n",
	"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":-1,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n",
	"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"cut",
	"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
	"data: not json\n\n",
	"",
	"data: [DONE]\n\n",
}

// checkRelayed: a relay ended either with the engine's error (Internal,
// named as the engine's) or with a well-formed sequence: events of
// content, reasoning or tool calls, then one event with a finish reason
// and non-negative usage.
func checkRelayed(t *testing.T, evs []*inferencev1.ChatCompletionResponse, err error) {
	t.Helper()
	if err != nil {
		st, ok := status.FromError(err)
		if !ok || st.Code() != codes.Internal || !strings.HasPrefix(st.Message(), "vllm: ") {
			t.Fatalf("relay failed with %v; want the engine's Internal error", err)
		}
		return
	}
	if len(evs) == 0 {
		t.Fatal("relay succeeded without an event")
	}
	for i, ev := range evs {
		last := i == len(evs)-1
		finished := ev.GetFinishReason() != inferencev1.FinishReason_FINISH_REASON_UNSPECIFIED
		if finished != last || (ev.GetUsage() != nil) != last {
			t.Fatalf("event %d of %d: %v", i, len(evs), ev)
		}
		if last {
			if u := ev.GetUsage(); u.GetPromptTokens() < 0 || u.GetCompletionTokens() < 0 {
				t.Fatalf("negative usage relayed: %v", u)
			}
			continue
		}
		if ev.GetContent() == "" && ev.GetReasoning() == "" && len(ev.GetToolCalls()) == 0 {
			t.Fatalf("event %d relays nothing: %v", i, ev)
		}
	}
}

func collectRelay(body []byte) ([]*inferencev1.ChatCompletionResponse, error) {
	var evs []*inferencev1.ChatCompletionResponse
	err := vllm.Relay(bytes.NewReader(body), func(ev *inferencev1.ChatCompletionResponse) error {
		evs = append(evs, proto.Clone(ev).(*inferencev1.ChatCompletionResponse))
		return nil
	})
	return evs, err
}

// FuzzRelay: the SSE relay under arbitrary bytes from the model server.
func FuzzRelay(f *testing.F) {
	for _, s := range relaySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		evs, err := collectRelay(body)
		checkRelayed(t, evs, err)
		// A caller that stops at the first event stops the relay there.
		stopped := status.Error(codes.Canceled, "caller gone")
		n := 0
		err = vllm.Relay(bytes.NewReader(body), func(*inferencev1.ChatCompletionResponse) error {
			n++
			return stopped
		})
		if n > 1 || (n == 1 && !errors.Is(err, stopped)) {
			t.Fatalf("relay went on after the caller stopped: %d events, %v", n, err)
		}
	})
}

// TestRelayRefusesLongLine: one line over the bound (4 MiB) is refused,
// whether it holds the data of an event or not, instead of being held in
// memory whole.
func TestRelayRefusesLongLine(t *testing.T) {
	long := strings.Repeat("x", 4<<20)
	for _, body := range []string{
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + long + "\"}}]}\n\ndata: [DONE]\n\n",
		": " + long + "\n" + relaySeeds[0],
		"data: " + long,
	} {
		evs, err := collectRelay([]byte(body))
		if err == nil || !strings.Contains(err.Error(), "exceeds the bound") || len(evs) != 0 {
			t.Fatalf("a line of %d bytes: %d events, %v", len(long), len(evs), err)
		}
	}
}

// FuzzChatCompletion: the engine over HTTP, the fuzzed bytes the model
// server's reply body (streamed, or whole for a plain reply): it ends,
// with the engine's error or a well-formed sequence of events.
func FuzzChatCompletion(f *testing.F) {
	for _, s := range relaySeeds {
		f.Add([]byte(s), false)
	}
	for _, s := range []string{
		`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello","reasoning_content":"r",` +
			`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`,
		`{"choices":[{"index":0,"message":{"content":null},"finish_reason":"stop"}],"usage":{"prompt_tokens":0,"completion_tokens":0}}`,
		`{"choices":[],"usage":{}}`,
		`{"choices":[{"index":0,"message":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":-3}}`,
		`{"error":{"message":"bad"}}`,
		`{"choices":[{"index":0,"message":{"content":"x"},"finish_reason":"stop"}]`,
	} {
		f.Add([]byte(s), true)
	}
	var body []byte // the current input; the server answers one call at a time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"` + chatID + `","object":"model","max_model_len":4096}]}`))
		case "/v1/chat/completions":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write(body)
		default:
			http.NotFound(w, r)
		}
	}))
	f.Cleanup(srv.Close)
	e, err := vllm.New(vllm.Config{Namespace: "gpu", URL: srv.URL})
	if err != nil {
		f.Fatal(err)
	}
	if err := e.Refresh(f.Context()); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte, whole bool) {
		body = in
		req := &inferencev1.ChatCompletionRequest{Model: chatMdl, Messages: []*inferencev1.Message{user("hi")}, WholeReply: whole}
		var evs []*inferencev1.ChatCompletionResponse
		err := e.ChatCompletion(t.Context(), req, func(ev *inferencev1.ChatCompletionResponse) error {
			evs = append(evs, proto.Clone(ev).(*inferencev1.ChatCompletionResponse))
			return nil
		})
		checkRelayed(t, evs, err)
	})
}
