//go:build !linux

package sysmon

// Reexec does nothing where the process cannot be started over in place;
// the monitor then sleeps as the runtime decides.
func Reexec() error { return nil }
