package perf_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tollgate-dev/tollgate/server/inference/vllm/vllmfake"
)

// upstreamModel is the model the instant upstream serves.
const upstreamModel = "meta-llama/Llama-3.1-8B-Instruct"

// upstream is an instant OpenAI-compatible model server: the bytes vLLM
// would send, with no model behind them. At start it asks vllmfake (a copy
// of vLLM's wire behaviour) once for its model list, its plain reply and
// its streamed reply to the benchmarks' chat message, then answers every
// request with those bytes, the stream one event per write and flush as
// vLLM sends it. It reads no JSON, so what it costs is Go's HTTP server
// and nothing else: the floor a gateway in front of it is compared with.
type upstream struct {
	URL string // http://127.0.0.1:PORT, without /v1

	models, plain []byte
	events        [][]byte // the stream's events, each with its blank line
	chats         atomic.Int64
}

// startUpstream records vllmfake's replies and serves them on 127.0.0.1
// until the benchmark ends.
func startUpstream(tb testing.TB) *upstream {
	tb.Helper()
	fake := vllmfake.Start(tb, vllmfake.Model{ID: upstreamModel})
	u := &upstream{}
	var err error
	if u.models, err = record(http.MethodGet, fake.URL+"/v1/models", ""); err != nil {
		tb.Fatal(err)
	}
	if u.plain, err = record(http.MethodPost, fake.URL+"/v1/chat/completions", chatRequest(upstreamModel, false)); err != nil {
		tb.Fatal(err)
	}
	// The stream as the vLLM engine asks for it: with the usage chunk.
	streamed, err := record(http.MethodPost, fake.URL+"/v1/chat/completions",
		strings.TrimSuffix(chatRequest(upstreamModel, true), "}")+`,"stream_options":{"include_usage":true}}`)
	if err != nil {
		tb.Fatal(err)
	}
	for ev := range bytes.SplitAfterSeq(streamed, []byte("\n\n")) {
		if len(ev) > 0 {
			u.events = append(u.events, ev)
		}
	}
	if n := len(u.events); n < 2 || string(u.events[n-1]) != "data: [DONE]\n\n" {
		tb.Fatalf("vllmfake's stream does not end with [DONE]: %q", streamed)
	}

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(u.serveHTTP)}
	go func() { _ = srv.Serve(lis) }()
	tb.Cleanup(func() { _ = srv.Close() })
	u.URL = "http://" + lis.Addr().String()
	return u
}

func record(method, url, body string) ([]byte, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s %s: status %d: %s", method, url, resp.StatusCode, b)
	}
	return b, err
}

var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

var streamTrue = []byte(`"stream":true`)

func (u *upstream) serveHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/v1/models" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(u.models)
	case r.URL.Path == "/v1/chat/completions" && r.Method == http.MethodPost:
		u.chats.Add(1)
		buf := bodyBuffers.Get().(*bytes.Buffer)
		buf.Reset()
		_, _ = buf.ReadFrom(r.Body)
		stream := bytes.Contains(buf.Bytes(), streamTrue)
		bodyBuffers.Put(buf)
		if !stream {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(u.plain)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		for _, ev := range u.events {
			if _, err := w.Write(ev); err != nil {
				return
			}
			_ = rc.Flush()
		}
	default:
		// Anything else (/tokenize: the benchmark's key has no TPD) is
		// not expected; a 404 makes it show as errors.
		http.NotFound(w, r)
	}
}
