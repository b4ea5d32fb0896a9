package dirlock_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/dirlock"
)

func TestSecondAcquireFailsUntilClosed(t *testing.T) {
	dir := t.TempDir()
	first, err := dirlock.Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, dirlock.FileName))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("lock file holds %q (%v), want this pid", b, err)
	}

	_, err = dirlock.Acquire(dir)
	var le *dirlock.LockedError
	if !errors.Is(err, dirlock.ErrLocked) || !errors.As(err, &le) {
		t.Fatalf("second Acquire: %v, want ErrLocked", err)
	}
	want := "data directory " + dir + " is in use by another tollgate process (pid " + strconv.Itoa(os.Getpid()) + ")"
	if err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := dirlock.Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after Close: %v", err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	if err := again.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// A lock file left behind by a process that ended locks nothing.
func TestStaleFileLocksNothing(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, dirlock.FileName), []byte("999999\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := dirlock.Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire over a stale file: %v", err)
	}
	_ = l.Close()
}

func TestMissingDirectory(t *testing.T) {
	_, err := dirlock.Acquire(filepath.Join(t.TempDir(), "nope"))
	if err == nil || errors.Is(err, dirlock.ErrLocked) {
		t.Fatalf("Acquire in a missing directory: %v", err)
	}
}

// Locks of two names in one directory are independent; each excludes a
// second holder of its own name.
func TestAcquireNamed(t *testing.T) {
	dir := t.TempDir()
	data, err := dirlock.Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer data.Close()
	other, err := dirlock.AcquireNamed(dir, "other.lock")
	if err != nil {
		t.Fatalf("AcquireNamed beside the data directory's lock: %v", err)
	}
	defer other.Close()
	var le *dirlock.LockedError
	if _, err := dirlock.AcquireNamed(dir, "other.lock"); !errors.As(err, &le) || le.PID != os.Getpid() {
		t.Fatalf("second AcquireNamed: %v, want a *LockedError with this pid", err)
	}
}
