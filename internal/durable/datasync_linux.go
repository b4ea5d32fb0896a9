package durable

import (
	"os"
	"syscall"
)

// DataSync flushes f's data and the metadata needed to read it back (its
// size), skipping timestamps: fdatasync(2), retried on EINTR. The audit
// journal syncs each group commit with it.
func DataSync(f *os.File) error {
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var syncErr error
	if err := sc.Control(func(fd uintptr) {
		for {
			syncErr = syscall.Fdatasync(int(fd))
			if syncErr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return syncErr
}
