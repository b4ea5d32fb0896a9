//go:build !linux

package durable

import "os"

// DataSync is a full sync where fdatasync(2) is not available.
func DataSync(f *os.File) error { return f.Sync() }
