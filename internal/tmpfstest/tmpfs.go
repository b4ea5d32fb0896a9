//go:build linux

// Package tmpfstest mounts a small tmpfs for tests of a full disk.
package tmpfstest

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// Mount mounts a tmpfs of size bytes on a new temporary directory and
// returns it; it is unmounted when the test ends. Mounting needs root:
// without it the test is skipped, except under CI=true, where it fails,
// so that CI cannot pass without running it.
func Mount(t testing.TB, size int64) string {
	t.Helper()
	dir := t.TempDir()
	err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size))
	if err != nil {
		msg := fmt.Sprintf("mounting a tmpfs for a full-disk test needs root (mount: %v)", err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}
