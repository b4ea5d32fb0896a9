package log

import (
	"errors"
	"strings"
	"testing"
	"time"

	bolterrors "go.etcd.io/bbolt/errors"
)

// A log another process has open is reported as locked, not as a bare
// "timeout".
func TestOpenLockedReportsLock(t *testing.T) {
	e := newEnv(t, Options{})
	defer func(d time.Duration) { lockTimeout = d }(lockTimeout)
	lockTimeout = 50 * time.Millisecond

	// bbolt's lock is a flock: a second open file, even in this process,
	// waits for it as another process would.
	_, err := Open(e.dir, Options{Now: e.clock.Now, Signer: e.pki.app})
	if !errors.Is(err, bolterrors.ErrTimeout) {
		t.Fatalf("Open of a log in use: %v, want bbolt ErrTimeout", err)
	}
	if !strings.Contains(err.Error(), FileName+" is locked by another process") {
		t.Fatalf("error %q does not say the file is locked", err)
	}
}
