package perf_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// column is what one column of the proxy table measured: one target as
// one client kind reaches it.
type column struct {
	name   string
	seq    latency // plain requests one after the other, on one connection
	ttfb   latency // streamed requests one after the other: time to first byte
	open   []openStats
	lag    [2]time.Duration // the open loops' sender lag, p50 and p99
	closed closedStats
	cpu    time.Duration // the gateway's CPU per request; 0: not measured
	rss    int64         // the gateway's RSS after the run, bytes; 0: not measured
	// answered is how many of the column's requests were answered, for
	// the benchmark's own checks; not in the table.
	answered int
}

type latency struct {
	p50    time.Duration
	errors int
}

type openStats struct {
	rate          int
	p50, p99, max time.Duration
	sent, errors  int
	heldBack      int // requests due when the in-flight bound was reached
}

type closedStats struct {
	rate   float64 // requests answered a second
	errors int
}

// formatTable lays the columns out side by side, a measure a row; the
// first column is the bare target, and the others' p50s and p99s carry
// what they add to it in parentheses.
func formatTable(cols []column) string {
	if len(cols) == 0 {
		return ""
	}
	ref := cols[0]
	var rows [][]string
	row := func(label string, cell func(c column, i int) string) {
		r := []string{label}
		for i, c := range cols {
			r = append(r, cell(c, i))
		}
		rows = append(rows, r)
	}
	withAdded := func(v, base time.Duration, i int) string {
		s := micros(v)
		if i > 0 && v > 0 && base > 0 {
			s += " (" + signedMicros(v-base) + ")"
		}
		return s
	}
	withErrors := func(s string, errs int) string {
		if errs > 0 {
			s += fmt.Sprintf(" [%d err]", errs)
		}
		return s
	}

	header := []string{"µs unless said"}
	for _, c := range cols {
		header = append(header, c.name)
	}
	rows = append(rows, header)
	row("1 connection, sequential: p50", func(c column, i int) string {
		return withErrors(withAdded(c.seq.p50, ref.seq.p50, i), c.seq.errors)
	})
	for k, o := range ref.open {
		prefix := fmt.Sprintf("open loop %s/s: ", thousands(int64(o.rate)))
		stat := func(c column) openStats {
			if k < len(c.open) {
				return c.open[k]
			}
			return openStats{}
		}
		row(prefix+"p50", func(c column, i int) string { return withAdded(stat(c).p50, o.p50, i) })
		row(prefix+"p99", func(c column, i int) string { return withAdded(stat(c).p99, o.p99, i) })
		row(prefix+"max", func(c column, _ int) string { return micros(stat(c).max) })
		row(prefix+"errors", func(c column, _ int) string {
			s := stat(c)
			return fmt.Sprintf("%d of %s", s.errors, thousands(int64(s.sent)))
		})
	}
	row("open loop: sender lag p50 / p99", func(c column, _ int) string {
		return micros(c.lag[0]) + " / " + micros(c.lag[1])
	})
	rates := make([]string, len(ref.open))
	for k, o := range ref.open {
		rates[k] = thousands(int64(o.rate))
	}
	row("open loop: held back at "+strings.Join(rates, " / "), func(c column, _ int) string {
		held := make([]string, len(c.open))
		for k, o := range c.open {
			held[k] = thousands(int64(o.heldBack))
		}
		return strings.Join(held, " / ")
	})
	row("closed loop, 32 conns: req/s", func(c column, _ int) string {
		return withErrors(thousands(int64(c.closed.rate+0.5)), c.closed.errors)
	})
	row("closed loop, 32 conns: × bare", func(c column, _ int) string {
		if ref.closed.rate <= 0 {
			return "—"
		}
		return strconv.FormatFloat(c.closed.rate/ref.closed.rate, 'f', 2, 64)
	})
	row("streamed, first byte: p50", func(c column, i int) string {
		return withErrors(withAdded(c.ttfb.p50, ref.ttfb.p50, i), c.ttfb.errors)
	})
	row("gateway CPU per request", func(c column, _ int) string {
		if c.cpu <= 0 {
			return "—"
		}
		return micros(c.cpu)
	})
	row("gateway RSS after the run, MiB", func(c column, _ int) string {
		if c.rss <= 0 {
			return "—"
		}
		return thousands((c.rss + 1<<19) >> 20)
	})

	return alignRows(rows)
}

// micros writes d in whole microseconds.
func micros(d time.Duration) string {
	return thousands(d.Round(time.Microsecond).Microseconds())
}

func signedMicros(d time.Duration) string {
	if d < 0 {
		return "−" + micros(-d)
	}
	return "+" + micros(d)
}

// thousands writes n with commas between thousands.
func thousands(n int64) string {
	if n < 0 {
		return "-" + thousands(-n)
	}
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func TestFormatTable(t *testing.T) {
	us := time.Microsecond
	bare := column{
		name: "bare",
		seq:  latency{p50: 80 * us}, ttfb: latency{p50: 70 * us},
		open:   []openStats{{rate: 500, p50: 90 * us, p99: 300 * us, max: 2100 * us, sent: 2500}, {rate: 2000, p50: 95 * us, p99: 400 * us, max: 12345 * us, sent: 10000}},
		lag:    [2]time.Duration{40 * us, 200 * us},
		closed: closedStats{rate: 20000},
	}
	disk := column{
		name: "journal on disk",
		seq:  latency{p50: 500 * us}, ttfb: latency{p50: 60 * us, errors: 2},
		open:   []openStats{{rate: 500, p50: 600 * us, p99: 1500 * us, max: 9000 * us, sent: 2500, errors: 3}, {rate: 2000, p50: 700 * us, p99: 2500 * us, max: 30000 * us, sent: 10000, heldBack: 1234}},
		lag:    [2]time.Duration{45 * us, 210 * us},
		closed: closedStats{rate: 5000.4, errors: 1},
		cpu:    180 * us, rss: 52<<20 + 100,
	}
	got := formatTable([]column{bare, disk})
	want := `µs unless said                               bare    journal on disk
1 connection, sequential: p50                  80         500 (+420)
open loop 500/s: p50                           90         600 (+510)
open loop 500/s: p99                          300     1,500 (+1,200)
open loop 500/s: max                        2,100              9,000
open loop 500/s: errors                0 of 2,500         3 of 2,500
open loop 2,000/s: p50                         95         700 (+605)
open loop 2,000/s: p99                        400     2,500 (+2,100)
open loop 2,000/s: max                     12,345             30,000
open loop 2,000/s: errors             0 of 10,000        0 of 10,000
open loop: sender lag p50 / p99          40 / 200           45 / 210
open loop: held back at 500 / 2,000         0 / 0          0 / 1,234
closed loop, 32 conns: req/s               20,000      5,000 [1 err]
closed loop, 32 conns: × bare                1.00               0.25
streamed, first byte: p50                      70   60 (−10) [2 err]
gateway CPU per request                         —                180
gateway RSS after the run, MiB                  —                 52
`
	if got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
	if got := formatTable(nil); got != "" {
		t.Errorf("no columns: %q", got)
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4500: "-4,500"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
