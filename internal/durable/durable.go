// Package durable writes small files so that they survive a power loss:
// the content is synced before the call returns, and SyncDir makes a new
// name durable in its directory.
package durable

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Create writes a new file at path with data and syncs it; it fails if
// path exists.
func Create(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, os.O_EXCL)
}

// Replace writes path with data, replacing any content, and syncs it.
func Replace(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, os.O_TRUNC)
}

func write(path string, data []byte, perm os.FileMode, flag int) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|flag, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}

// SyncDir makes the entries of dir (a file created or removed in it)
// durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// syncNewName is SyncDir; tests replace it to see which directories
// MkdirAll syncs.
var syncNewName = SyncDir

// MkdirAll creates dir and any missing parents, as os.MkdirAll does, and
// makes each new name durable by syncing the directory that holds it: a
// power loss after it returns cannot take back any of them.
func MkdirAll(dir string, perm os.FileMode) error {
	dir = filepath.Clean(dir)
	var created []string // deepest first
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, perm); err != nil {
		return err
	}
	for i := len(created) - 1; i >= 0; i-- {
		if err := syncNewName(filepath.Dir(created[i])); err != nil {
			return err
		}
	}
	return nil
}
