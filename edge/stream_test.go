package edge_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// sseFrames splits a streamed body on blank lines, failing unless every
// event is one `data: ` line and nothing follows the last blank line.
func sseFrames(t testing.TB, body []byte) []string {
	t.Helper()
	s := string(body)
	if !strings.HasSuffix(s, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", s)
	}
	frames := strings.Split(strings.TrimSuffix(s, "\n\n"), "\n\n")
	for i, f := range frames {
		if !strings.HasPrefix(f, "data: ") || strings.Contains(f, "\n") {
			t.Errorf("frame %d is not a single data line: %q", i, f)
		}
	}
	return frames
}

// chunks builds the exact events of a streamed builtin/echo reply.
type chunks struct {
	id    string
	usage bool // include_usage: every chunk carries "usage":null
}

// chunk is one chat.completion.chunk event; delta and finish are raw JSON.
func (c chunks) chunk(delta, finish string) string {
	s := `data: {"id":"` + c.id + `","object":"chat.completion.chunk","created":1767225600,"model":"builtin/echo",` +
		`"choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `,"logprobs":null}]`
	if c.usage {
		s += `,"usage":null`
	}
	return s + "}"
}

func (c chunks) usageChunk(prompt, completion int) string {
	return fmt.Sprintf(`data: {"id":"%s","object":"chat.completion.chunk","created":1767225600,"model":"builtin/echo",`+
		`"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, c.id, prompt, completion, prompt+completion)
}

// reply is the whole stream of a reply: role chunk, one chunk per content
// delta, finish chunk, usage chunk when asked for, [DONE].
func (c chunks) reply(deltas []string, finish string, prompt, completion int) []string {
	out := []string{c.chunk(`{"role":"assistant","content":""}`, "null")}
	for _, d := range deltas {
		out = append(out, c.chunk(d, "null"))
	}
	out = append(out, c.chunk(`{}`, `"`+finish+`"`))
	if c.usage {
		out = append(out, c.usageChunk(prompt, completion))
	}
	return append(out, "data: [DONE]")
}

func wantFrames(t testing.TB, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d frames, want %d", len(got), len(want))
	}
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("frame %d:\n got %s\nwant %s", i, g, w)
		}
	}
}

// wantStream checks a streamed response's status and headers.
func wantStream(t testing.TB, r response) {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d, body %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	if cc := r.header.Get("Cache-Control"); cc != "no-cache" {
		t.Errorf("Cache-Control %q", cc)
	}
	if !strings.HasPrefix(r.id(), "req_") {
		t.Errorf("x-request-id %q", r.id())
	}
}

func TestStreamFraming(t *testing.T) {
	const user = `{"role":"user","content":"hello big world"}`
	cases := []struct {
		name               string
		body               string
		usage              bool
		deltas             []string
		finish             string
		prompt, completion int
	}{
		{
			name:   "without stream_options",
			body:   `{"model":"builtin/echo","stream":true,"messages":[` + user + `]}`,
			deltas: []string{`{"content":"hello "}`, `{"content":"big "}`, `{"content":"world"}`},
			finish: "stop",
		},
		{
			name:   "include_usage false",
			body:   `{"model":"builtin/echo","stream":true,"stream_options":{"include_usage":false},"messages":[` + user + `]}`,
			deltas: []string{`{"content":"hello "}`, `{"content":"big "}`, `{"content":"world"}`},
			finish: "stop",
		},
		{
			name:   "include_usage",
			body:   `{"model":"builtin/echo","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"be brief"},` + user + `]}`,
			usage:  true,
			deltas: []string{`{"content":"hello "}`, `{"content":"big "}`, `{"content":"world"}`},
			finish: "stop", prompt: 5, completion: 3,
		},
		{
			name:   "max_tokens cuts with length",
			body:   `{"model":"builtin/echo","stream":true,"max_tokens":2,"stream_options":{"include_usage":true},"messages":[` + user + `]}`,
			usage:  true,
			deltas: []string{`{"content":"hello "}`, `{"content":"big"}`},
			finish: "length", prompt: 3, completion: 2,
		},
		{
			name:   "text parts, escaping",
			body:   `{"model":"builtin/echo","stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"naïve"},{"type":"text","text":"\"quoted\"\ttab"}]}]}`,
			deltas: []string{`{"content":"naïve\n"}`, `{"content":"\"quoted\"\t"}`, `{"content":"tab"}`},
			finish: "stop",
		},
		{
			name:   "empty reply",
			body:   `{"model":"builtin/echo","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"no user here"}]}`,
			usage:  true,
			finish: "stop", prompt: 3, completion: 0,
		},
	}
	eachTransport(t, stackConfig{}, func(t *testing.T, s *stack) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := s.post(t, "/v1/chat/completions", keyAll, tc.body)
				wantStream(t, r)
				got := sseFrames(t, r.body)
				want := chunks{id: r.id(), usage: tc.usage}.reply(tc.deltas, tc.finish, tc.prompt, tc.completion)
				wantFrames(t, got, want)
				if !tc.usage && strings.Contains(string(r.body), `"usage"`) {
					t.Errorf("usage key without include_usage")
				}
			})
		}
	})
}

var callIDRe = regexp.MustCompile(`"id":"(call_[A-Za-z0-9]+)"`)

const weatherTool = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`

func TestStreamToolCall(t *testing.T) {
	eachTransport(t, stackConfig{}, func(t *testing.T, s *stack) {
		r := s.post(t, "/v1/chat/completions", keyTool, `{"model":"builtin/echo","stream":true,`+weatherTool+
			`,"messages":[{"role":"user","content":"/tool get_weather {\"city\":\"Oslo\"}"}]}`)
		wantStream(t, r)
		got := sseFrames(t, r.body)
		if len(got) < 2 {
			t.Fatalf("frames %q", got)
		}
		m := callIDRe.FindStringSubmatch(got[0])
		if m == nil {
			t.Fatalf("no call id in %s", got[0])
		}
		c := chunks{id: r.id()}
		want := []string{
			// As OpenAI sends it: the role, content null (not "", which
			// makes an empty text part) and the call's first piece.
			c.chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"`+m[1]+`","type":"function","function":{"name":"get_weather","arguments":""}}]}`, "null"),
			c.chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\""}}]}`, "null"),
			c.chunk(`{"tool_calls":[{"index":0,"function":{"arguments":":\"Oslo\"}"}}]}`, "null"),
			c.chunk(`{}`, `"tool_calls"`),
			"data: [DONE]",
		}
		wantFrames(t, got, want)
	})
}

// reportReturn sends the error each stream handler returns on ch.
func reportReturn(ch chan<- error) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		err := h(srv, ss)
		ch <- err
		return err
	}
}

// readFrame reads one SSE event: lines up to and including a blank line.
func readFrame(br *bufio.Reader) (string, error) {
	var b strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return b.String(), err
		}
		if line == "\n" {
			return strings.TrimSuffix(b.String(), "\n"), nil
		}
		b.WriteString(line)
	}
}

// awaitGoroutines polls until the process has at most n goroutines; the
// deadline only guards against a hang.
func awaitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, baseline %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A client that disconnects mid-stream cancels the engine call, and
// nothing the request started outlives it. With /delay the engine is
// between pieces when the client goes; a stalled engine sends nothing more
// at all, so only the cancellation reaching it (not a failed write of the
// next chunk) can end the call.
func TestStreamDisconnectCancelsEngine(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		stall         bool
	}{
		{"delay", "/delay 50 a b c d e f g h", false},
		{"stalled engine", "a b c d e f g h", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			returned := make(chan error, 1)
			sc := stackConfig{interceptors: []grpc.StreamServerInterceptor{reportReturn(returned)}}
			// release unblocks a stalled engine should the cancellation
			// never reach it, so that a failing test still ends.
			release := make(chan struct{})
			if tc.stall {
				sc.interceptors = append(sc.interceptors, stallAfter(1, release))
			}
			s := newStack(t, sc)
			t.Cleanup(func() { close(release) })

			// Warm up in-process with a unary call, so the gRPC
			// connection exists before the baseline and no HTTP
			// connection does.
			warm := httptest.NewRecorder()
			warmReq := httptest.NewRequest(http.MethodGet, "/v1/models", nil)
			warmReq.Header.Set("Authorization", "Bearer "+keyAll)
			s.edge.ServeHTTP(warm, warmReq)
			if warm.Code != http.StatusOK {
				t.Fatalf("warm-up: %d %s", warm.Code, warm.Body)
			}
			baseline := runtime.NumGoroutine()

			transport := &http.Transport{}
			client := &http.Client{Transport: transport}
			// The timeout only guards against a hang (say, chunks that
			// are never flushed); the test cancels long before it.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			body := `{"model":"builtin/echo","stream":true,"messages":[{"role":"user","content":"` + tc.content + `"}]}`
			resp, err := client.Do(s.newRequest(t, http.MethodPost, "/v1/chat/completions", keyAll, body).WithContext(ctx))
			if err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(resp.Body)
			c := chunks{id: resp.Header.Get("x-request-id")}
			for i, want := range []string{c.chunk(`{"role":"assistant","content":""}`, "null"), c.chunk(`{"content":"a "}`, "null")} {
				got, err := readFrame(br)
				if err != nil || got != want {
					t.Fatalf("frame %d = %q (%v), want %q", i, got, err, want)
				}
			}
			cancel()
			_ = resp.Body.Close()

			select {
			case err := <-returned:
				if !errors.Is(err, context.Canceled) && status.Code(err) != codes.Canceled {
					t.Fatalf("engine call ended with %v, want cancellation", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the engine call was not cancelled")
			}
			transport.CloseIdleConnections()
			awaitGoroutines(t, baseline)
		})
	}
}

// stallAfter lets n events of each reply through; the next send waits for
// the call to be cancelled, as a hung engine would (or for release).
func stallAfter(n int, release <-chan struct{}) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return h(srv, &stallingStream{ServerStream: ss, left: n, release: release})
	}
}

type stallingStream struct {
	grpc.ServerStream
	left    int
	release <-chan struct{}
}

func (s *stallingStream) SendMsg(m any) error {
	if s.left == 0 {
		select {
		case <-s.Context().Done():
			return s.Context().Err()
		case <-s.release:
			return status.Error(codes.DeadlineExceeded, "stalled engine released at the end of the test")
		}
	}
	s.left--
	return s.ServerStream.SendMsg(m)
}

// abortAfter lets n events of each reply through, then fails the stream
// with err, as an engine that breaks mid-reply would.
func abortAfter(n int, err error) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return h(srv, &abortingStream{ServerStream: ss, left: n, err: err})
	}
}

type abortingStream struct {
	grpc.ServerStream
	left int
	err  error
}

func (s *abortingStream) SendMsg(m any) error {
	if s.left == 0 {
		return s.err
	}
	s.left--
	return s.ServerStream.SendMsg(m)
}

func TestStreamErrorAfterStart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		event string // the error event, %s the request id
	}{
		{"internal", status.Error(codes.Internal, "engine exploded"),
			`data: {"error":{"code":"internal_error","message":"internal error; retry with backoff","type":"server_error","request_id":"%s"}}`},
		{"unavailable", status.Error(codes.Unavailable, "engine restarted"),
			`data: {"error":{"code":"model_unavailable","message":"engine restarted","type":"server_error","request_id":"%s"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t, stackConfig{interceptors: []grpc.StreamServerInterceptor{abortAfter(2, tc.err)}})
			r := s.post(t, "/v1/chat/completions", keyAll,
				`{"model":"builtin/echo","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello big world"}]}`)
			wantStream(t, r)
			c := chunks{id: r.id(), usage: true}
			wantFrames(t, sseFrames(t, r.body), []string{
				c.chunk(`{"role":"assistant","content":""}`, "null"),
				c.chunk(`{"content":"hello "}`, "null"),
				c.chunk(`{"content":"big "}`, "null"),
				fmt.Sprintf(tc.event, r.id()),
			})
		})
	}
}

// An engine that fails before its first event is an ordinary HTTP error,
// streamed or not; so is one that fails mid-reply when not streamed.
func TestEngineErrorBeforeStart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		after  int
		stream bool
	}{
		{"streamed, first event", 0, true},
		{"plain, first event", 0, false},
		{"plain, mid-reply", 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t, stackConfig{interceptors: []grpc.StreamServerInterceptor{abortAfter(tc.after, status.Error(codes.Internal, "engine exploded"))}})
			r := s.post(t, "/v1/chat/completions", keyAll,
				fmt.Sprintf(`{"model":"builtin/echo","stream":%t,"messages":[{"role":"user","content":"hello big world"}]}`, tc.stream))
			e := wantError(t, r, http.StatusInternalServerError, "internal_error", "server_error", "")
			if strings.Contains(fmt.Sprint(e["message"]), "exploded") {
				t.Errorf("internal detail leaked: %v", e["message"])
			}
		})
	}
}

// An engine that ends a call as cancelled for reasons of its own, while
// the client still waits, is an internal error like any other: the plain
// path answers 500 in the envelope, a started stream ends with the error
// event, and the event is recorded with what the client got (not as a
// client that went away, 499).
func TestEngineCanceledWhileClientWaits(t *testing.T) {
	const internal = `data: {"error":{"code":"internal_error","message":"internal error; retry with backoff","type":"server_error","request_id":"%s"}}`
	for _, e := range []struct {
		name string
		err  error
	}{{"context.Canceled", context.Canceled}, {"codes.Canceled", status.Error(codes.Canceled, "engine gave up")}} {
		for _, tc := range []struct {
			name   string
			after  int
			stream bool
		}{
			{"plain, first event", 0, false},
			{"plain, mid-reply", 2, false},
			{"streamed, first event", 0, true},
			{"streamed, mid-reply", 2, true},
		} {
			t.Run(e.name+"/"+tc.name, func(t *testing.T) {
				audit := newAuditRecorder()
				s := newStack(t, stackConfig{audit: audit, interceptors: []grpc.StreamServerInterceptor{abortAfter(tc.after, e.err)}})
				r := s.post(t, "/v1/chat/completions", keyAll,
					fmt.Sprintf(`{"model":"builtin/echo","stream":%t,"messages":[{"role":"user","content":"hello big world"}]}`, tc.stream))
				status := http.StatusInternalServerError
				if tc.stream && tc.after > 0 {
					status = http.StatusOK
					wantStream(t, r)
					c := chunks{id: r.id()}
					wantFrames(t, sseFrames(t, r.body), []string{
						c.chunk(`{"role":"assistant","content":""}`, "null"),
						c.chunk(`{"content":"hello "}`, "null"),
						c.chunk(`{"content":"big "}`, "null"),
						fmt.Sprintf(internal, r.id()),
					})
				} else {
					wantError(t, r, http.StatusInternalServerError, "internal_error", "server_error", "")
				}
				ev := audit.next(t)
				if ev.Status != status || ev.RequestID != r.id() || !bytes.Equal(ev.ResponseBody, r.body) {
					t.Errorf("recorded status %d id %s body %q, want %d %s %q", ev.Status, ev.RequestID, ev.ResponseBody, status, r.id(), r.body)
				}
			})
		}
	}
}

// A stream whose start cannot be recorded durably does not begin: the
// client gets 500 in the envelope, nothing of the stream, and the request
// is recorded as that 500.
func TestStreamRefusedWhenItsStartIsNotRecorded(t *testing.T) {
	audit := newAuditRecorder()
	audit.startFail = errors.New("injected: the start file failed")
	s := newStack(t, stackConfig{audit: audit})
	for _, tc := range []struct{ path, body string }{
		{chatPath, `{"model":"builtin/echo","stream":true,"messages":[{"role":"user","content":"hello there"}]}`},
		{completionsPath, `{"model":"builtin/echo","stream":true,"prompt":"hello there"}`},
		{"/v1/responses", `{"model":"builtin/echo","stream":true,"input":"hello there"}`},
	} {
		wantError(t, s.post(t, tc.path, keyAll, tc.body), http.StatusInternalServerError, "internal_error", "server_error", "")
		if ev := audit.next(t); ev.Status != http.StatusInternalServerError || ev.Endpoint != tc.path {
			t.Errorf("%s: recorded status %d at %s, want 500", tc.path, ev.Status, ev.Endpoint)
		}
	}
}
