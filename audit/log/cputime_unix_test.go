//go:build unix

package log

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time the process has used, user and system,
// all threads (the runtime's and the collector's included).
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
