package boltstore

import (
	"testing"
	"time"
)

// SetLockTimeout shortens the wait for a locked file for the test.
func SetLockTimeout(t *testing.T, d time.Duration) {
	old := lockTimeout
	lockTimeout = d
	t.Cleanup(func() { lockTimeout = old })
}
