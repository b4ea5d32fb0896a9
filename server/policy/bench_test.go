package policy

import (
	"context"
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

	b.Run("no-log", func(b *testing.B) {
		benchDecide(b, LoadOptions{}, in, true)
	})
	b.Run("json-log", func(b *testing.B) {
		benchDecide(b, LoadOptions{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}, in, true)
	})
	b.Run("scope-deny", func(b *testing.B) { // refused before the bundle
		out := in
		out.Request.Tools = []string{"get_weather", "delete_repo"}
		benchDecide(b, LoadOptions{}, out, false)
	})
	b.Run("parallel", func(b *testing.B) {
		e, err := Load(context.Background(), defaultBundle, LoadOptions{})
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

func benchDecide(b *testing.B, opts LoadOptions, in Input, allow bool) {
	e, err := Load(context.Background(), defaultBundle, opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lat := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	for b.Loop() {
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
