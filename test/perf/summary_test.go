package perf_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// formatSummary lays several runs of the same columns out as one table
// whose cells are "min–median–max" over the runs, for the measures
// docs/performance.md quotes: what the gateway adds at one connection
// and to the first streamed byte, the open loops' p99 and errors, the
// closed loop against bare, and the gateway's CPU and memory. runs[i]
// holds run i's columns, in the same order in every run; the first
// column of each run is the bare target.
func formatSummary(runs [][]column) string {
	if len(runs) == 0 || len(runs[0]) == 0 {
		return ""
	}
	names := make([]string, len(runs[0]))
	for i, c := range runs[0] {
		names[i] = c.name
	}
	// spread gathers one figure of column i over the runs.
	spread := func(i int, f func(c, ref column) (float64, bool)) string {
		var vs []float64
		for _, run := range runs {
			if i >= len(run) {
				continue
			}
			if v, ok := f(run[i], run[0]); ok {
				vs = append(vs, v)
			}
		}
		if len(vs) == 0 {
			return "—"
		}
		slices.Sort(vs)
		return minMedianMax(vs)
	}
	micro := func(d time.Duration) float64 { return float64(d.Round(time.Microsecond).Microseconds()) }

	rows := [][]string{append([]string{"min–median–max"}, names...)}
	row := func(label string, f func(c, ref column) (float64, bool)) {
		r := []string{label}
		for i := range names {
			r = append(r, spread(i, f))
		}
		rows = append(rows, r)
	}
	row("1 connection p50, µs added", func(c, ref column) (float64, bool) {
		if c.name == ref.name {
			return micro(c.seq.p50), true
		}
		return micro(c.seq.p50 - ref.seq.p50), true
	})
	for k, o := range runs[0][0].open {
		row(fmt.Sprintf("open loop %s/s: p99, µs", thousands(int64(o.rate))), func(c, _ column) (float64, bool) {
			if k >= len(c.open) {
				return 0, false
			}
			return micro(c.open[k].p99), true
		})
		row(fmt.Sprintf("open loop %s/s: errors", thousands(int64(o.rate))), func(c, _ column) (float64, bool) {
			if k >= len(c.open) {
				return 0, false
			}
			return float64(c.open[k].errors), true
		})
	}
	row("closed loop, 32 conns: × bare", func(c, ref column) (float64, bool) {
		if ref.closed.rate <= 0 {
			return 0, false
		}
		return float64(int(100*c.closed.rate/ref.closed.rate+0.5)) / 100, true
	})
	row("streamed first byte p50, µs added", func(c, ref column) (float64, bool) {
		if c.name == ref.name {
			return micro(c.ttfb.p50), true
		}
		return micro(c.ttfb.p50 - ref.ttfb.p50), true
	})
	row("gateway CPU per request, µs", func(c, _ column) (float64, bool) {
		return micro(c.cpu), c.cpu > 0
	})
	row("gateway RSS after the run, MiB", func(c, _ column) (float64, bool) {
		return float64((c.rss + 1<<19) >> 20), c.rss > 0
	})
	return alignRows(rows)
}

// minMedianMax writes sorted figures as "min–median–max" (one figure
// when they are all equal); the median of an even count is the lower
// middle one, so every figure written was measured.
func minMedianMax(sorted []float64) string {
	f := func(v float64) string {
		if v == float64(int64(v)) {
			return thousands(int64(v))
		}
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	lo, mid, hi := sorted[0], sorted[(len(sorted)-1)/2], sorted[len(sorted)-1]
	if lo == hi {
		return f(lo)
	}
	return f(lo) + "–" + f(mid) + "–" + f(hi)
}

// alignRows pads a table's cells: the first column to the left, the
// others to the right.
func alignRows(rows [][]string) string {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, s := range r {
			widths[i] = max(widths[i], len([]rune(s)))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, s := range r {
			pad := strings.Repeat(" ", widths[i]-len([]rune(s)))
			if i == 0 {
				b.WriteString(s + pad)
			} else {
				b.WriteString("   " + pad + s)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestFormatSummary(t *testing.T) {
	us := time.Microsecond
	run := func(bareP50, gwP50, gwP99 time.Duration, gwCPU time.Duration, closed float64) []column {
		return []column{
			{name: "bare", seq: latency{p50: bareP50}, ttfb: latency{p50: bareP50},
				open: []openStats{{rate: 1000, p99: 300 * us}}, closed: closedStats{rate: 10000}},
			{name: "gw", seq: latency{p50: gwP50}, ttfb: latency{p50: gwP50 + 10*us},
				open: []openStats{{rate: 1000, p99: gwP99, errors: 1}}, closed: closedStats{rate: closed},
				cpu: gwCPU, rss: 60 << 20},
		}
	}
	got := formatSummary([][]column{
		run(100*us, 400*us, 2000*us, 210*us, 4000),
		run(90*us, 300*us, 1500*us, 190*us, 5000),
		run(110*us, 360*us, 9000*us, 200*us, 4500),
	})
	want := `min–median–max                            bare                  gw
1 connection p50, µs added          90–100–110         210–250–300
open loop 1,000/s: p99, µs                 300   1,500–2,000–9,000
open loop 1,000/s: errors                    0                   1
closed loop, 32 conns: × bare                1      0.40–0.45–0.50
streamed first byte p50, µs added   90–100–110         220–260–310
gateway CPU per request, µs                  —         190–200–210
gateway RSS after the run, MiB               —                  60
`
	if got != want {
		t.Errorf("summary:\n%s\nwant:\n%s", got, want)
	}
}
