package log

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/audit/leaf"
	"github.com/tollgate-dev/tollgate/audit/syncload"
)

// Bodies of a typical chat completion: ~1 KiB in, ~2 KiB out.
var (
	benchRequest  = bytes.Repeat([]byte(`{"role":"user","content":"abcdefgh"}`), 28)
	benchResponse = bytes.Repeat([]byte(`data: {"choices":[{"delta":{"content":"xy"}}]}`), 44)
)

func benchEvent(n uint64) Event {
	tenant := [...]string{"acme", "globex", "initech", "umbrella"}[n%4]
	return Event{
		RequestID: fmt.Sprintf("req_b%012d", n), TenantID: tenant, KeyID: "key_" + tenant,
		Time: day1, Endpoint: "/v1/chat/completions", Model: "builtin/echo", Status: 200,
		PromptTokens: 120, CompletionTokens: 240, PolicyDecisionID: "dec_0123456789abcdef0123456789abcdef",
		RequestBody: benchRequest, ResponseBody: benchResponse,
	}
}

func benchLog(b *testing.B, opts Options) *Log {
	b.Helper()
	return benchLogSigner(b, opts, true)
}

// benchLogSigner is benchLog, without a signer (no heads, no receipts)
// unless signer.
func benchLogSigner(b *testing.B, opts Options, signer bool) *Log {
	b.Helper()
	opts.Now = func() time.Time { return day1 }
	if signer {
		opts.Signer = newTestPKI(b, "app_bench").app
	}
	l, err := Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	return l
}

// report reports the latencies' p50 and p99, and the log's throughput and
// events per commit.
func report(b *testing.B, all []time.Duration, elapsed time.Duration, l *Log) {
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "events/s")
	reportPercentiles(b, all)
	st := l.Stats()
	b.ReportMetric(float64(st.Events)/float64(max(st.Commits, 1)), "events/commit")
}

// cpuMeter measures the CPU time the process spends from its start: on a
// machine shared with other work, a steadier figure of what each event
// costs than the wall time.
type cpuMeter struct {
	start time.Duration
	ok    bool
}

func startCPU() cpuMeter {
	t, ok := processCPU()
	return cpuMeter{start: t, ok: ok}
}

// report reports the CPU time per event of n since the start, in µs.
func (m cpuMeter) report(b *testing.B, n int, unit string) {
	if now, ok := processCPU(); m.ok && ok && n > 0 {
		b.ReportMetric(float64((now-m.start).Nanoseconds())/1000/float64(n), unit)
	}
}

// reportPercentiles reports the p50 and p99 latencies.
func reportPercentiles(b *testing.B, all []time.Duration) {
	s := syncload.Summarize(all)
	b.ReportMetric(float64(s.P50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(s.P99.Microseconds())/1000, "p99-ms")
}

// BenchmarkAppend measures durable appends (real fsync) under saturation:
// W concurrent writers (in-flight requests) appending back to back, with
// receipts (a signer; each receipt also encoded as the edge's header) and
// without (no signer), so that their CPU per event compares.
func BenchmarkAppend(b *testing.B) {
	for _, writers := range []int{64, 256} {
		for _, receipts := range []bool{false, true} {
			b.Run(fmt.Sprintf("writers=%d/receipts=%v", writers, receipts), func(b *testing.B) {
				benchAppend(b, writers, receipts)
			})
		}
	}
}

func benchAppend(b *testing.B, writers int, receipts bool) {
	{
		{
			opts := Options{}
			if !receipts {
				opts.ApplianceID = "app_bench"
			}
			l := benchLogSigner(b, opts, receipts)
			var next atomic.Int64
			var (
				mu  sync.Mutex
				all []time.Duration
			)
			var wg sync.WaitGroup
			b.ResetTimer()
			start, cpu := time.Now(), startCPU()
			for range writers {
				wg.Go(func() {
					var mine []time.Duration
					for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
						ev := benchEvent(uint64(i))
						t0 := time.Now()
						r, err := l.Append(context.Background(), ev)
						if err != nil {
							b.Error(err)
							return
						}
						if receipts {
							if r.Header() == "" {
								b.Error("no receipt")
								return
							}
						}
						mine = append(mine, time.Since(t0))
					}
					mu.Lock()
					all = append(all, mine...)
					mu.Unlock()
				})
			}
			wg.Wait()
			report(b, all, time.Since(start), l)
			cpu.report(b, b.N, "cpu-µs/event")
		}
	}
}

// BenchmarkAppendPaced measures what the audit step adds to a request at a
// steady load below saturation: appends arrive at a fixed rate, each on
// its own goroutine, as requests finishing on an appliance would; evenly
// spaced, or as a Poisson process (requests finish independently, so they
// bunch: closer to what a gateway sees). The syncs=2 variants let two
// journal syncs overlap, for comparison.
func BenchmarkAppendPaced(b *testing.B) {
	for _, c := range []struct {
		rate, syncs int
		poisson     bool
	}{{1000, 0, false}, {1000, 0, true}, {5000, 0, false}, {5000, 0, true}, {20000, 0, false}, {5000, 2, false}, {20000, 2, false}} {
		name := fmt.Sprintf("rate=%d", c.rate)
		if c.poisson {
			name += ",poisson"
		}
		if c.syncs != 0 {
			name += fmt.Sprintf(",syncs=%d", c.syncs)
		}
		b.Run(name, func(b *testing.B) {
			l := benchLog(b, Options{MaxSyncsInFlight: c.syncs})
			at := syncload.Arrivals(b.N, c.rate, c.poisson)
			b.ResetTimer()
			cpu := startCPU()
			res := syncload.Run(context.Background(), at, func(i int) {
				if _, err := l.Append(context.Background(), benchEvent(uint64(i))); err != nil {
					b.Error(err)
				}
			})
			cpu.report(b, b.N, "cpu-µs/op")
			report(b, res.Latencies, res.Elapsed, l)
		})
	}
}

// BenchmarkGroupCommitFloor is the least any durable group commit can
// cost on this disk at a paced load: the same arrivals as
// BenchmarkAppendPaced, each appending ~3 KiB, one goroutine writing
// whatever is queued to an already zero-filled file and calling fdatasync,
// then waking the batch. No leaf, no index, no zero-fill or bbolt beside
// it: what Append adds over this is the log's own cost.
func BenchmarkGroupCommitFloor(b *testing.B) {
	for _, c := range []struct {
		rate    int
		poisson bool
	}{{1000, false}, {1000, true}, {5000, false}, {5000, true}} {
		name := fmt.Sprintf("rate=%d", c.rate)
		if c.poisson {
			name += ",poisson"
		}
		b.Run(name, func(b *testing.B) {
			at := syncload.Arrivals(b.N, c.rate, c.poisson)
			// The percentiles are the result; ns/op includes the floor
			// file's zero-fill.
			b.ResetTimer()
			res, err := syncload.Floor(context.Background(), b.TempDir(), at, 3<<10)
			if err != nil {
				b.Fatal(err)
			}
			reportPercentiles(b, res.Latencies)
		})
	}
}

// BenchmarkFdatasync is the floor under any durable append on this disk:
// a 4 KiB write and fdatasync, one at a time, in the benchmark's directory.
func BenchmarkFdatasync(b *testing.B) {
	all, err := syncload.Syncs(context.Background(), b.TempDir(), b.N)
	if err != nil {
		b.Fatal(err)
	}
	reportPercentiles(b, all)
}

// BenchmarkLeaves measures what the central plane's forwarder reads per
// head: one tenant's leaves between two heads, out of a day of four
// tenants' interleaved events.
func BenchmarkLeaves(b *testing.B) {
	l := benchLog(b, Options{})
	const events = 40000
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1); i <= events; i = next.Add(1) {
				if _, err := l.Append(context.Background(), benchEvent(uint64(i))); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ResetTimer()
	for b.Loop() {
		// The last 10,000 sequences: ~2,500 leaves of the tenant.
		leaves, err := l.Leaves("acme", "2026-03-01", events-10000, events)
		if err != nil || len(leaves) < 2000 {
			b.Fatalf("%d leaves, %v", len(leaves), err)
		}
	}
}

// BenchmarkApplyRound measures one applier round: n journaled events of
// four tenants (batches of 8, as at a few thousand events/s) stored in
// audit.db in one bbolt transaction, commit included. Each round is a
// fresh day, so its trees start empty, in a database that grows across
// rounds as the appliance's does.
func BenchmarkApplyRound(b *testing.B) {
	for _, n := range []int{1024, 8192} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			l := benchLog(b, Options{})
			leafBytes := bytes.Repeat([]byte("x"), 600)
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				jobs := applyJobs(day1.AddDate(0, 0, 1+i).Format("2006-01-02"), n, leafBytes)
				a := newApplier(time.Hour)
				b.StartTimer()
				if err := l.db.Update(func(tx *bolt.Tx) error { return a.applyTx(tx, jobs) }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/round")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
		})
	}
}

// applyJobs returns n journaled events of day as the committer hands
// them to the applier, eight per batch.
func applyJobs(day string, n int, leafBytes []byte) []batchJob {
	tenants := [...]string{"acme", "globex", "initech", "umbrella"}
	sizes := map[string]uint64{}
	var jobs []batchJob
	for i := range n {
		if i%8 == 0 {
			jobs = append(jobs, batchJob{day: day})
		}
		j := &jobs[len(jobs)-1]
		tenant := tenants[i%len(tenants)]
		seq := uint64(i + 1)
		j.entries = append(j.entries, entry{tenant: tenant, requestID: fmt.Appendf(nil, "req_%s_%08d", day, i),
			seq: seq, leafIndex: sizes[tenant], leaf: leafBytes, leafHash: leaf.Hash(fmt.Appendf(nil, "%d", seq)),
			bodyOff: seq * 3000, reqLen: 1000, respLen: 2000, codec: codecS2, storedLen: 300})
		sizes[tenant]++
		j.end, j.lastSeq = seq*3000+3000, seq
	}
	return jobs
}

// benchWords are the words of the streamed benchmark replies: common
// English words drawn with a Zipf law, so that a reply compresses about
// as prose does, a little worse (no phrase repeats).
var benchWords = strings.Fields(`the of and to a in is it you that he was for on are with as I his they
be at one have this from or had by hot word but what some we can out other were all there when up use
your how said an each she which do their time if will way about many then them write would like so
these her long make thing see him two has look more day could go come did number sound no most people
my over know water than call first who may down side been now find any new work part take get place
made live where after back little only round man year came show every good me give our under name
very through just form sentence great think say help low line differ turn cause much mean before move
right boy old too same tell does set three want air well also play small end put home read hand port
large spell add even land here must big high such follow act why ask men change went light kind off
need house picture try us again animal point mother world near build self earth father head stand own
page should country found answer school grow study still learn plant cover food sun four between state
keep eye never last let thought city tree cross farm hard start might story saw far sea draw left late
run while press close night real life few north open seem together next white children begin got walk
example ease paper group always music those both mark often letter until mile river car feet care
second book carry took science eat room friend began idea fish mountain stop once base hear horse cut
sure watch color face wood main enough plain girl usual young ready above ever red list though feel
talk bird soon body dog family direct pose leave song measure door product black short numeral class
wind question happen complete ship area half rock order fire south problem piece told knew pass since
top whole king space heard best hour better true during hundred five remember step early hold west
ground interest reach fast verb sing listen six table travel less morning ten simple several vowel
toward war lay against pattern slow center love person money serve appear road map rain rule govern
pull cold notice voice unit power town fine certain fly fall lead cry dark machine note wait plan
figure star box noun field rest correct able pound done beauty drive stood contain front teach week
final gave green oh quick develop ocean warm free minute strong special mind behind clear tail produce
fact street inch multiply nothing course stay wheel full force blue object decide surface deep moon
island foot system busy test record boat common gold possible plane stead dry wonder laugh thousand ago
ran check game shape equate miss brought heat snow tire bring yes distant fill east paint language among`)

// streamEvent is event n with the bodies of a streamed builtin/echo
// completion of words words: a chat request whose user message holds the
// words, and its reply's SSE bytes in the edge's chunk format
// (edge/chunk.go), one word per chunk, then the finish, usage and [DONE].
func streamEvent(n uint64, words int) Event {
	rng := rand.New(rand.NewPCG(n, uint64(words)))
	zipf := rand.NewZipf(rng, 1.1, 2, uint64(len(benchWords)-1))
	text := make([]string, words)
	for i := range text {
		text[i] = benchWords[zipf.Uint64()]
	}
	ev := benchEvent(n)
	ev.RequestID = fmt.Sprintf("req_s%012d", n)
	ev.PromptTokens, ev.CompletionTokens = int64(words), int64(words)
	msg := strings.Join(text, " ")
	ev.RequestBody = fmt.Appendf(nil, `{"model":"builtin/echo","messages":[{"role":"user","content":%q}],"stream":true,"stream_options":{"include_usage":true}}`, msg)
	head := fmt.Sprintf(`data: {"id":"req_01KB%022d","object":"chat.completion.chunk","created":1772366400,"model":"builtin/echo","choices":`, n)
	var sse []byte
	sse = fmt.Appendf(sse, "%s[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null,\"logprobs\":null}],\"usage\":null}\n\n", head)
	for i, w := range text {
		if i < len(text)-1 {
			w += " "
		}
		sse = fmt.Appendf(sse, "%s[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null,\"logprobs\":null}],\"usage\":null}\n\n", head, w)
	}
	sse = fmt.Appendf(sse, "%s[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\",\"logprobs\":null}],\"usage\":null}\n\n", head)
	sse = fmt.Appendf(sse, "%s[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\ndata: [DONE]\n\n", head, words, words, 2*words)
	ev.ResponseBody = sse
	return ev
}

// BenchmarkPrepare measures what Append does on the caller's goroutine
// before it queues the event for the committer: the log's copy of the
// bodies, their digests and the leaf template (with compressed bodies,
// their compression too). body=typical is BenchmarkAppend's event;
// stream-N a streamed reply of N words (~225 bytes of SSE a word).
func BenchmarkPrepare(b *testing.B) {
	for _, c := range []struct {
		name string
		ev   Event
	}{{"body=typical", benchEvent(1)}, {"body=stream-500", streamEvent(1, 500)}, {"body=stream-4000", streamEvent(1, 4000)}} {
		b.Run(c.name, func(b *testing.B) {
			l := benchLog(b, Options{})
			b.SetBytes(int64(len(c.ev.RequestBody) + len(c.ev.ResponseBody)))
			cpu, n := startCPU(), 0
			for b.Loop() {
				if _, err := l.prepare(c.ev); err != nil {
					b.Fatal(err)
				}
				n++
			}
			cpu.report(b, n, "cpu-µs/op")
		})
	}
}

// BenchmarkAppendStream is BenchmarkAppend/writers=64 with streamed
// events of 500 words (~2 KiB in, ~110 KiB of SSE out), reporting the
// journal's bytes per event too.
func BenchmarkAppendStream(b *testing.B) {
	const writers = 64
	evs := make([]Event, 64)
	for i := range evs {
		evs[i] = streamEvent(uint64(i), 500)
	}
	l := benchLog(b, Options{})
	var next atomic.Int64
	var wg sync.WaitGroup
	var (
		mu  sync.Mutex
		all []time.Duration
	)
	b.ResetTimer()
	start, cpu := time.Now(), startCPU()
	for range writers {
		wg.Go(func() {
			var mine []time.Duration
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				ev := evs[i%int64(len(evs))]
				ev.RequestID = fmt.Sprintf("req_s%012d", i)
				t0 := time.Now()
				if _, err := l.Append(context.Background(), ev); err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	report(b, all, time.Since(start), l)
	cpu.report(b, b.N, "cpu-µs/event")
	l.writeMu.Lock()
	end := l.w.end
	l.writeMu.Unlock()
	b.ReportMetric(float64(end)/float64(b.N), "journal-B/event")
}

// BenchmarkReceipts is the receipts' CPU alone, per event, for batches of
// n events: the committer's share (claim hashes, tree, one signature per
// batch: signBatch) and each append's (its receipt and the header the
// edge sends: path, JSON, base64url).
func BenchmarkReceipts(b *testing.B) {
	pki := newTestPKI(b, "app_bench")
	l := &Log{opts: Options{ApplianceID: "app_bench", Signer: pki.app, Now: func() time.Time { return day1 },
		Logger: slog.New(slog.DiscardHandler)}}
	l.w.day = "2026-03-01"
	for _, n := range []int{1, 4, 16, 64, 256, 2048} {
		entries := make([]entry, n)
		times := make([]string, n)
		for i := range entries {
			tpl, err := leaf.NewTemplate(leaf.Leaf{Schema: leaf.Schema, RequestID: fmt.Sprintf("req_b%012d", i),
				TenantID: "acme", ApplianceID: "app_bench", KeyID: "key_acme", Time: leaf.FormatTime(day1),
				Endpoint: "/v1/chat/completions", Model: "builtin/echo", Status: 200,
				RequestSHA256: strings.Repeat("ab", 32), ResponseSHA256: strings.Repeat("cd", 32), Salt: strings.Repeat("01", 16)})
			if err != nil {
				b.Fatal(err)
			}
			lb := tpl.Bytes(uint64(i + 1))
			entries[i] = entry{tenant: "acme", requestID: []byte(fmt.Sprintf("req_b%012d", i)), seq: uint64(i + 1),
				leafIndex: uint64(i), leaf: lb, leafHash: leaf.Hash(lb)}
			times[i] = leaf.FormatTime(day1)
		}
		b.Run(fmt.Sprintf("batch=%d/commit", n), func(b *testing.B) {
			for b.Loop() {
				if s, _ := l.signBatch(entries, times); s == nil {
					b.Fatal("not signed")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1000/float64(b.N*n), "µs/event")
		})
		signed, _ := l.signBatch(entries, times)
		b.Run(fmt.Sprintf("batch=%d/append", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				if h := signed.headerOf(i % n); h == "" {
					b.Fatal("no header value")
				}
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1000/float64(b.N), "µs/event")
		})
	}
}

// BenchmarkStreamStart measures what Start adds to a stream's time to
// first byte: writers each run streams one after another, a Start (timed)
// then the stream's Append, so that starts share the disk with the
// journal's commits as on a gateway serving streams.
func BenchmarkStreamStart(b *testing.B) {
	for _, writers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			l := benchLog(b, Options{})
			var next atomic.Int64
			var (
				mu  sync.Mutex
				all []time.Duration
			)
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for range writers {
				wg.Go(func() {
					var mine []time.Duration
					for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
						ev := benchEvent(uint64(i))
						t0 := time.Now()
						err := l.Start(context.Background(), StreamStart{RequestID: ev.RequestID, TenantID: ev.TenantID,
							KeyID: ev.KeyID, Time: ev.Time, Endpoint: ev.Endpoint, Model: ev.Model,
							PromptTokens: ev.PromptTokens, PolicyDecisionID: ev.PolicyDecisionID, RequestBody: ev.RequestBody})
						if err != nil {
							b.Error(err)
							return
						}
						mine = append(mine, time.Since(t0))
						if _, err := l.Append(context.Background(), ev); err != nil {
							b.Error(err)
							return
						}
					}
					mu.Lock()
					all = append(all, mine...)
					mu.Unlock()
				})
			}
			wg.Wait()
			b.ReportMetric(float64(len(all))/time.Since(start).Seconds(), "streams/s")
			reportPercentiles(b, all)
		})
	}
}

// benchBodies are the bodies of typical proxied events, request then
// reply, as compressBodies gets them: a short chat completion as a
// model server answers it (~1 KB), the same request streamed (five
// chunks, usage, [DONE]: ~2.3 KB) and a 500-word stream (~115 KB).
func benchBodies() []struct {
	name   string
	bodies []byte
} {
	const req = `{"model":"meta-llama/Llama-3.1-8B-Instruct","messages":[{"role":"system","content":"You are a helpful assistant. Answer briefly."},{"role":"user","content":"What is the capital of France, and what is it known for?"}],"max_tokens":256,"temperature":0.2}`
	const reply = `{"id":"chatcmpl-8f3c2a1b9d7e4f60a5b3c1d2e4f6a7b8","object":"chat.completion","created":1772366400,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"message":{"role":"assistant","content":"Paris is the capital of France. It is known for the Eiffel Tower, the Louvre and its cafés.","refusal":null,"annotations":null,"audio":null,"function_call":null,"tool_calls":[],"reasoning_content":null},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"service_tier":null,"system_fingerprint":null,"usage":{"prompt_tokens":57,"total_tokens":80,"completion_tokens":23,"prompt_tokens_details":null},"prompt_logprobs":null,"kv_transfer_params":null}`
	const head = `data: {"id":"chatcmpl-8f3c2a1b9d7e4f60a5b3c1d2e4f6a7b8","object":"chat.completion.chunk","created":1772366400,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":`
	sse := head + `[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n"
	for _, w := range []string{"Paris", " is", " the", " capital", "."} {
		sse += head + `[{"index":0,"delta":{"content":"` + w + `"},"logprobs":null,"finish_reason":null}]}` + "\n\n"
	}
	sse += head + `[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":null}]}` + "\n\n"
	sse += head + `[],"usage":{"prompt_tokens":57,"total_tokens":62,"completion_tokens":5}}` + "\n\ndata: [DONE]\n\n"
	stream := streamEvent(1, 500)
	return []struct {
		name   string
		bodies []byte
	}{
		{"chat", []byte(req + reply)},
		{"sse-5", []byte(req + sse)},
		{"stream-500", append(bytes.Clone(stream.RequestBody), stream.ResponseBody...)},
	}
}

// BenchmarkBodies is the cost of storing and reading an event's bodies:
// compressBodies on the appending goroutine, decodeBodies on a read,
// with the stored size as a share of the bodies (stored/sent).
func BenchmarkBodies(b *testing.B) {
	for _, c := range benchBodies() {
		codec, stored := compressBodies(c.bodies)
		b.Run("op=compress/body="+c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.bodies)))
			b.ReportAllocs()
			for b.Loop() {
				compressBodies(c.bodies)
			}
			b.ReportMetric(float64(len(stored))/float64(len(c.bodies)), "stored/sent")
		})
		b.Run("op=decode/body="+c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.bodies)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeBodies(codec, stored, uint64(len(c.bodies))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
