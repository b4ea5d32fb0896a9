package policy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"
)

// BenchmarkDecide measures one decision with the default bundle
// (examples/policy): scope check, input document, prepared-query
// evaluation. It reports p50 and p99 latency besides the mean. The context
// is cancellable, as a request's is.
//
//	go test -run '^$' -bench BenchmarkDecide -benchmem ./server/policy/
func BenchmarkDecide(b *testing.B) {
	temp, maxTokens := 0.7, int64(512)
	in := chat(key("app", []string{"builtin/echo", "builtin/embed"}, "tool:get_weather", "tool:get_time"),
		auto, "get_weather", "get_time")
	in.Request.Temperature = &temp
	in.Request.MaxTokens = &maxTokens

	// The sub-benchmarks but memo-hit evaluate the bundle for every
	// decision: the memo is off.
	b.Run("no-log", func(b *testing.B) {
		benchDecide(b, LoadOptions{NoDecisionMemo: true}, in, true)
	})
	b.Run("json-log", func(b *testing.B) {
		benchDecide(b, LoadOptions{NoDecisionMemo: true, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}, in, true)
	})
	b.Run("scope-deny", func(b *testing.B) { // refused before the bundle
		out := in
		out.Request.Tools = []string{"get_weather", "delete_repo"}
		benchDecide(b, LoadOptions{NoDecisionMemo: true}, out, false)
	})
	// memo-hit is no-log with the memo on: every decision after the first
	// reuses the output of the first (the request id and time, which the
	// default bundle does not read, differ as they would).
	b.Run("memo-hit", func(b *testing.B) {
		benchDecide(b, LoadOptions{}, in, true)
	})
	b.Run("parallel", func(b *testing.B) {
		e, err := Load(context.Background(), defaultBundle, LoadOptions{NoDecisionMemo: true})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := e.Decide(ctx, in); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// requestIDs vary the request id between decisions, as requests do.
var requestIDs = func() []string {
	ids := make([]string, 64)
	for i := range ids {
		ids[i] = fmt.Sprintf("req_bench%d", i)
	}
	return ids
}()

func benchDecide(b *testing.B, opts LoadOptions, in Input, allow bool) {
	e, err := Load(context.Background(), defaultBundle, opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lat := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		in.Request.ID = requestIDs[i%len(requestIDs)]
		in.Time = in.Time.Add(time.Microsecond)
		start := time.Now()
		d, err := e.Decide(ctx, in)
		lat = append(lat, time.Since(start))
		if err != nil || d.Allow != allow {
			b.Fatalf("decision %+v, %v", d, err)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}
