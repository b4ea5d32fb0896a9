// Package dirlock keeps two processes from using one data directory at
// once. Each serving command takes the lock at start and holds it for the
// life of the process: a second process on the same directory fails at
// once, with the holder's pid, instead of blocking on a file lock deep
// inside one of its stores (the embedded etcd's blocks with no timeout).
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FileName is the lock file in the data directory. It holds the pid of the
// process that has the lock; the lock itself is an advisory flock on the
// file, released by the kernel when the process ends however it ends, so
// a stale file left by a crash locks nothing.
const FileName = ".lock"

// ErrLocked matches (errors.Is) the error of Acquire when another process
// holds the lock.
var ErrLocked = errors.New("dirlock: locked by another process")

// LockedError is the error of Acquire when another process holds the lock.
type LockedError struct {
	Dir string
	// PID is the holder's process id as it recorded it; 0 if unknown.
	PID int
}

func (e *LockedError) Error() string {
	msg := "data directory " + e.Dir + " is in use by another tollgate process"
	if e.PID > 0 {
		msg += " (pid " + strconv.Itoa(e.PID) + ")"
	}
	return msg
}

// Is makes errors.Is(err, ErrLocked) hold.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// Lock is a held lock on a data directory.
type Lock struct {
	f *os.File
}

// Acquire takes the lock of dir, which must exist, without waiting: if
// another process holds it, it fails at once with a *LockedError. The lock
// is held until Close (or until the process ends). Two Acquire calls in
// one process exclude each other too.
func Acquire(dir string) (*Lock, error) {
	return AcquireNamed(dir, FileName)
}

// AcquireNamed is Acquire with a lock file of another name in dir: a
// directory can have two roles in one process (the audit journal's
// directory may be the data directory), each locked on its own. The
// caller words the *LockedError for its role.
func AcquireNamed(dir, name string) (*Lock, error) {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock directory: %w", err)
	}
	locked, err := tryLock(f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if !locked {
		pid := readPID(f)
		_ = f.Close()
		return nil, &LockedError{Dir: dir, PID: pid}
	}
	// The pid is for the message a second process prints; failing to
	// record it does not weaken the lock.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Close releases the lock. The file stays: removing it would let a
// process that opened it before the removal lock a name nobody else sees.
func (l *Lock) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the last descriptor drops the flock
	l.f = nil
	return err
}

func readPID(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
