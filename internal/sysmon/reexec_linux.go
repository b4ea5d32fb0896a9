package sysmon

import (
	"fmt"
	"os"
	"syscall"
)

// Reexec starts the process over in place (the same process id, binary,
// arguments and open files) with Setting in its GODEBUG, unless the
// environment already sets schedtrace; then it returns nil and does
// nothing. Call it first thing in main: whatever ran before it runs twice.
// It returns only when there is nothing to do or the exec failed.
func Reexec() error {
	env, changed := Env(os.Environ())
	if !changed {
		return nil
	}
	// /proc/self/exe is the running binary even when its file has since
	// been replaced or removed (an upgrade in place).
	if err := syscall.Exec("/proc/self/exe", os.Args, env); err != nil {
		return fmt.Errorf("exec with GODEBUG=%s: %w", Setting, err)
	}
	return nil
}
