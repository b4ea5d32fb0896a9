package vllm_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/inference/vllm"
	"github.com/tollgate-dev/tollgate/server/inference/vllm/vllmfake"
)

// recordStream returns the bytes of a streamed completion of words words,
// as the (fake) server sends them.
func recordStream(b *testing.B, words int) []byte {
	b.Helper()
	srv := vllmfake.Start(b)
	body := `{"model":"meta-llama/Llama-3.1-8B-Instruct","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"` +
		strings.TrimSpace(strings.Repeat("word ", words)) + `"}]}`
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return raw
}

// BenchmarkRelay is the engine's own cost per chunk of a completion: SSE
// framing and JSON decoding of vLLM's chunks into the engine's events.
func BenchmarkRelay(b *testing.B) {
	const words = 256
	raw := recordStream(b, words)
	chunks := bytes.Count(raw, []byte("data: "))
	send := func(*inferencev1.ChatCompletionResponse) error { return nil }
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if err := vllm.Relay(bytes.NewReader(raw), send); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*chunks), "ns/chunk")
}

// BenchmarkChatCompletion is a whole short completion through the engine
// over loopback HTTP to the fake server, the server's own time included.
func BenchmarkChatCompletion(b *testing.B) {
	srv := vllmfake.Start(b)
	e, err := vllm.New(vllm.Config{Namespace: "gpu", URL: srv.URL})
	if err != nil {
		b.Fatal(err)
	}
	if err := e.Refresh(b.Context()); err != nil {
		b.Fatal(err)
	}
	send := func(*inferencev1.ChatCompletionResponse) error { return nil }
	// A 256-word reply, streamed from the server or taken whole (a
	// plain reply's client), and a three-word one.
	long := strings.TrimSpace(strings.Repeat("word ", 256))
	for _, tc := range []struct {
		name, text string
		whole      bool
	}{{"3-words/streamed", "hello big world", false}, {"3-words/whole", "hello big world", true},
		{"256-words/streamed", long, false}, {"256-words/whole", long, true}} {
		b.Run(tc.name, func(b *testing.B) {
			req := &inferencev1.ChatCompletionRequest{Model: chatMdl, Messages: []*inferencev1.Message{user(tc.text)}, WholeReply: tc.whole}
			b.ReportAllocs()
			for b.Loop() {
				if err := e.ChatCompletion(b.Context(), req, send); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTransport compares the engine's Transport with net/http's on
// short completions over loopback to the fake server: one caller paced
// at a call per millisecond (the process idle between calls, as a
// gateway at light load, where waking another thread costs most), and 1
// and 4 callers back to back. It reports CPU per call from getrusage
// (the process's, the server's included, the same for both) and context
// switches per call, which a shared machine's noise moves less than
// time.
func BenchmarkTransport(b *testing.B) {
	srv := vllmfake.Start(b)
	send := func(*inferencev1.ChatCompletionResponse) error { return nil }
	for _, callers := range []int{0, 1, 4} { // 0: one caller, paced
		for _, tc := range []struct {
			name   string
			client *http.Client
		}{
			{"net-http", &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}}},
			{"engine", vllm.NewClient(nil)},
		} {
			e, err := vllm.New(vllm.Config{Namespace: "gpu", URL: srv.URL, Client: tc.client})
			if err != nil {
				b.Fatal(err)
			}
			if err := e.Refresh(b.Context()); err != nil {
				b.Fatal(err)
			}
			for _, whole := range []bool{false, true} {
				load := fmt.Sprintf("callers=%d", callers)
				if callers == 0 {
					load = "paced"
				}
				name := tc.name + "/" + load + "/streamed"
				if whole {
					name = tc.name + "/" + load + "/whole"
				}
				req := &inferencev1.ChatCompletionRequest{Model: chatMdl, Messages: []*inferencev1.Message{user("hello big world")}, WholeReply: whole}
				b.Run(name, func(b *testing.B) {
					b.ReportAllocs()
					var next atomic.Int64
					before := usage(b)
					var wg sync.WaitGroup
					for range max(callers, 1) {
						wg.Go(func() {
							for next.Add(1) <= int64(b.N) {
								if err := e.ChatCompletion(context.Background(), req, send); err != nil {
									b.Error(err)
									return
								}
								if callers == 0 {
									time.Sleep(time.Millisecond)
								}
							}
						})
					}
					wg.Wait()
					after := usage(b)
					cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
					b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
					b.ReportMetric(float64(after.Nvcsw+after.Nivcsw-before.Nvcsw-before.Nivcsw)/float64(b.N), "csw/op")
				})
			}
		}
	}
}

func usage(b *testing.B) syscall.Rusage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru
}
