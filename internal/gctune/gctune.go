// Package gctune sets the garbage collector's pacing for Tollgate's
// processes. The gateway's live heap is small (tens of MB) and its hot
// path allocates per request, so at Go's default GOGC=100 the collector
// runs every few milliseconds under load, and requests that meet a cycle
// make the latency tail: through the whole gateway with a durable audit
// event, at 1,000 req/s, p99 2.1 ms at GOGC=100 against 1.3–1.5 ms at 400
// (docs/performance.md). So the heap may grow to five times the live heap
// instead of two, but not past a soft limit on the memory the Go runtime
// holds (DefaultMemoryLimit): without it the heap of a gateway under load
// grows to a hundred MB and more of garbage that the process keeps, and a
// collection over it takes longer. With it the collector runs more often
// only when the heap nears the limit, and the runtime bounds the CPU it
// then spends (a live heap above the limit is not an error: the limit is
// soft, and the runtime caps the collector at about half the CPU).
//
// The limit is most of the gateway's RSS: the live heap under load is
// 10–17 MB, the rest of the anonymous memory is garbage up to the heap
// goal, and ~40 MiB more are the binary's own pages. Each step down costs
// collections: after the same run (docs/performance.md) 64 MiB gave an
// RSS of 97 MiB and 2.4 % of the gateway's CPU in the collector, 48 MiB
// 82–85 MiB and 6 %, 40 MiB 75 MiB and 11 %, 32 MiB 67 MiB and 19 %; and
// 48 MiB raised the p99 at 1,000 req/s in five of six paired runs.
package gctune

import (
	"os"
	"runtime/debug"
)

// DefaultGCPercent is the GOGC Tollgate runs with unless the GOGC
// environment variable says otherwise.
const DefaultGCPercent = 400

// DefaultMemoryLimit is the soft limit on the Go runtime's memory
// (debug.SetMemoryLimit) Tollgate runs with unless the GOMEMLIMIT
// environment variable says otherwise. It stays at 64 MiB: a lower limit
// takes RSS off only by collecting more often, which is the latency tail
// GOGC=400 is there to avoid.
const DefaultMemoryLimit = 64 << 20

// Apply sets DefaultGCPercent unless GOGC is set in the environment, and
// DefaultMemoryLimit unless GOMEMLIMIT is (an operator's choice, which the
// runtime has already applied).
func Apply() {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(DefaultGCPercent)
	}
	if _, ok := os.LookupEnv("GOMEMLIMIT"); !ok {
		debug.SetMemoryLimit(DefaultMemoryLimit)
	}
}
