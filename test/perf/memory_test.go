package perf_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// printMappings prints where a process's resident memory is, from
// /proc/PID/smaps: the resident kB of each mapped file (the binary, the
// bbolt files) and of the anonymous mappings together, largest first.
func printMappings(tb testing.TB, pid int) {
	tb.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		tb.Error(err)
		return
	}
	defer func() { _ = f.Close() }()
	rss := map[string]int64{}
	name := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"):
			name = "[anonymous]"
			if len(fields) >= 6 {
				name = fields[5]
			}
		case len(fields) == 3 && fields[0] == "Rss:":
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			rss[name] += kb
		}
	}
	if err := sc.Err(); err != nil {
		tb.Error(err)
	}
	names := make([]string, 0, len(rss))
	for n := range rss {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int { return int(rss[b] - rss[a]) })
	for _, n := range names {
		if rss[n] >= 256 {
			fmt.Printf("resident %8.1f MiB  %s\n", float64(rss[n])/1024, n)
		}
	}
}

// printGoMemory prints the Go runtime's view of a process's memory and
// collections, from its metrics.
func printGoMemory(tb testing.TB, url string) {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Error(err)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Error(err)
		return
	}
	for line := range strings.Lines(string(body)) {
		for _, p := range []string{"go_memstats_heap_inuse_bytes ", "go_memstats_heap_idle_bytes ", "go_memstats_heap_released_bytes ",
			"go_memstats_heap_alloc_bytes ", "go_memstats_stack_inuse_bytes ", "go_memstats_sys_bytes ", "go_memstats_next_gc_bytes ",
			"go_goroutines ", "go_threads "} {
			if strings.HasPrefix(line, p) {
				fmt.Print(line)
			}
		}
	}
}
