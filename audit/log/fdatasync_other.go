//go:build !linux

package log

import "os"

// fdatasync is a full sync where fdatasync(2) is not available.
func fdatasync(f *os.File) error { return f.Sync() }
