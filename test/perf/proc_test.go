package perf_test

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// clockTicks is the unit of the times in /proc/PID/stat: USER_HZ, 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// procSample is what /proc/PID/stat says of a process.
type procSample struct {
	cpu time.Duration // utime + stime
	rss int64         // bytes
}

// readProc reads /proc/PID/stat.
func readProc(pid int) (procSample, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procSample{}, err
	}
	return parseProcStat(b, int64(os.Getpagesize()))
}

// parseProcStat reads utime (field 14), stime (15) and rss (24, in pages)
// from a /proc/PID/stat line. The command name, field 2, is in
// parentheses and may itself hold spaces and parentheses, so the fields
// are counted from the last ')'.
func parseProcStat(b []byte, pageSize int64) (procSample, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procSample{}, fmt.Errorf("/proc stat %.80q: no command name", b)
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3, the state
	field := func(n int) (int64, error) {
		if n-3 >= len(f) {
			return 0, fmt.Errorf("/proc stat %.80q: no field %d", b, n)
		}
		return strconv.ParseInt(string(f[n-3]), 10, 64)
	}
	utime, err := field(14)
	if err != nil {
		return procSample{}, err
	}
	stime, err := field(15)
	if err != nil {
		return procSample{}, err
	}
	rss, err := field(24)
	if err != nil {
		return procSample{}, err
	}
	return procSample{cpu: time.Duration(utime+stime) * time.Second / clockTicks, rss: rss * pageSize}, nil
}

// cpuPerRequest is the CPU a process spent between two samples, divided
// by the requests sent meanwhile.
func cpuPerRequest(before, after procSample, requests int) time.Duration {
	if requests <= 0 {
		return 0
	}
	return (after.cpu - before.cpu) / time.Duration(requests)
}

// isTmpfs tells whether dir is on a tmpfs.
func isTmpfs(dir string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false, err
	}
	return st.Type == unix.TMPFS_MAGIC, nil
}

func TestParseProcStat(t *testing.T) {
	// A command name with a space and a ')' in it, utime 250 and stime 50
	// ticks, rss 3000 pages.
	line := []byte("4242 (tollgate dev) x) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 9 0 1234 1300000000 3000 18446744073709551615 1 1 0 0 0 0 0 0 2143420159 0 0 0 17 1 0 0 0 0 0\n")
	s, err := parseProcStat(line, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if s.cpu != 3*time.Second || s.rss != 3000*4096 {
		t.Errorf("cpu %v rss %d, want 3s and %d", s.cpu, s.rss, 3000*4096)
	}
	if _, err := parseProcStat([]byte("4242 (tollgate) S 1 2 3"), 4096); err == nil {
		t.Error("a short line was read")
	}
	if _, err := parseProcStat([]byte("garbage"), 4096); err == nil {
		t.Error("a line without a command name was read")
	}
	if got := cpuPerRequest(procSample{cpu: time.Second}, procSample{cpu: 3 * time.Second}, 10000); got != 200*time.Microsecond {
		t.Errorf("cpu per request %v, want 200µs", got)
	}
	if got := cpuPerRequest(procSample{}, procSample{cpu: time.Second}, 0); got != 0 {
		t.Errorf("cpu per request of no requests %v, want 0", got)
	}
	// And the real file of this process reads.
	self, err := readProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if self.rss <= 0 {
		t.Errorf("this process's rss: %d", self.rss)
	}
}
