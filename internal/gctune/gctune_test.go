package gctune

import (
	"math"
	"os"
	"runtime/debug"
	"testing"
)

// restore puts back the collector's settings of the test process.
func restore(t *testing.T) {
	gc, limit := debug.SetGCPercent(-1), debug.SetMemoryLimit(-1)
	debug.SetGCPercent(gc)
	t.Cleanup(func() {
		debug.SetGCPercent(gc)
		debug.SetMemoryLimit(limit)
	})
}

func TestApply(t *testing.T) {
	tests := []struct {
		name      string
		env       map[string]string // set, as the runtime read them at start
		wantGC    int
		wantLimit int64
	}{
		{name: "defaults", wantGC: DefaultGCPercent, wantLimit: DefaultMemoryLimit},
		{name: "operator's GOGC", env: map[string]string{"GOGC": "250"}, wantGC: 250, wantLimit: DefaultMemoryLimit},
		{name: "operator's GOMEMLIMIT", env: map[string]string{"GOMEMLIMIT": "1GiB"}, wantGC: DefaultGCPercent, wantLimit: 1 << 30},
		{name: "both", env: map[string]string{"GOGC": "off", "GOMEMLIMIT": "256MiB"}, wantGC: -1, wantLimit: 256 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			restore(t)
			// What the runtime does at start with no GOGC nor GOMEMLIMIT.
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(math.MaxInt64)
			for _, name := range []string{"GOGC", "GOMEMLIMIT"} {
				v, ok := tt.env[name]
				if !ok {
					if _, set := os.LookupEnv(name); set {
						t.Skipf("%s is set in the test's environment", name)
					}
					continue
				}
				t.Setenv(name, v)
			}
			// What the runtime did at start with tt.env.
			if tt.env["GOGC"] != "" {
				debug.SetGCPercent(tt.wantGC)
			}
			if tt.env["GOMEMLIMIT"] != "" {
				debug.SetMemoryLimit(tt.wantLimit)
			}
			Apply()
			if got := debug.SetGCPercent(100); got != tt.wantGC {
				t.Errorf("GC percent %d after Apply, want %d", got, tt.wantGC)
			}
			if got := debug.SetMemoryLimit(-1); got != tt.wantLimit {
				t.Errorf("memory limit %d after Apply, want %d", got, tt.wantLimit)
			}
		})
	}
}
