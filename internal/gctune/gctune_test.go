package gctune

import (
	"os"
	"runtime/debug"
	"testing"
)

func TestApply(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))

	t.Setenv("GOGC", "250")
	debug.SetGCPercent(250) // what the runtime did at start with this environment
	Apply()
	if got := debug.SetGCPercent(250); got != 250 {
		t.Fatalf("Apply changed an operator's GOGC to %d", got)
	}
}

func TestApplyDefault(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	if _, set := os.LookupEnv("GOGC"); set {
		t.Skip("GOGC is set in the test's environment")
	}
	Apply()
	if got := debug.SetGCPercent(100); got != DefaultGCPercent {
		t.Fatalf("GC percent %d after Apply, want %d", got, DefaultGCPercent)
	}
}
