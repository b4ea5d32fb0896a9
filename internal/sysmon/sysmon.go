// Package sysmon keeps the Go runtime's system monitor out of its deep
// sleep in Tollgate's long-running processes.
//
// The monitor (runtime.sysmon) is a thread of its own that polls every
// 20 µs, backing off to 10 ms once it has found nothing to do fifty times
// in a row. When every processor of the runtime is idle it sleeps deeply
// instead, and the first system call after that wakes it and starts the
// 20 µs polling over. A gateway at a few hundred to a few thousand
// requests a second goes idle between requests, so each request woke the
// monitor and paid for fifty or more of its wake-ups: on the development
// VM, 11–16 % of `tollgate gateway`'s CPU at 1,000 req/s was the monitor
// sleeping and waking (docs/performance.md).
//
// The runtime has no setting for the monitor's sleep except one: while
// GODEBUG's schedtrace is on, the monitor never sleeps deeply (so that
// the trace is printed on time). Setting asks for a trace every
// 2,147,483,647 ms, the largest the runtime takes (24.8 days), so the
// monitor backs off to its 10 ms poll when the process is idle, and the
// trace is one line ("SCHED …" on standard error) whenever the host's
// uptime passes a multiple of 24.8 days: at start on a host up longer
// than that, then every 24.8 days. GODEBUG is read only when a process
// starts, so Reexec starts the process over, in place, with it set.
package sysmon

import "strings"

// Setting is the GODEBUG setting Tollgate's long-running processes run
// with.
const Setting = "schedtrace=2147483647"

// Env returns env with Setting added to its GODEBUG, and true; or env as
// it is, and false, when GODEBUG already sets schedtrace: an operator's
// choice (GODEBUG=schedtrace=0 lets the monitor sleep deeply again).
func Env(env []string) ([]string, bool) {
	at := -1 // the first GODEBUG, the one the runtime reads
	for i, kv := range env {
		if strings.HasPrefix(kv, "GODEBUG=") {
			at = i
			break
		}
	}
	if at >= 0 {
		for setting := range strings.SplitSeq(strings.TrimPrefix(env[at], "GODEBUG="), ",") {
			if name, _, _ := strings.Cut(setting, "="); strings.TrimSpace(name) == "schedtrace" {
				return env, false
			}
		}
	}
	out := make([]string, 0, len(env)+1)
	switch {
	case at < 0:
		out = append(append(out, env...), "GODEBUG="+Setting)
	case env[at] == "GODEBUG=":
		out = append(out, env...)
		out[at] = "GODEBUG=" + Setting
	default:
		out = append(out, env...)
		out[at] = env[at] + "," + Setting
	}
	return out, true
}
