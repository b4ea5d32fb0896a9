// Package examples ships the example files that the binary needs at run
// time, so `tollgate dev` works from any directory.
package examples

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// policyFS holds the default policy bundle, examples/policy.
//
//go:embed all:policy
var policyFS embed.FS

// WriteDefaultPolicy writes the default policy bundle into dir (replacing
// files of the same name) and returns dir.
func WriteDefaultPolicy(dir string) (string, error) {
	sub, err := fs.Sub(policyFS, "policy")
	if err != nil {
		return "", err
	}
	err = fs.WalkDir(sub, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.FromSlash(path))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := fs.ReadFile(sub, path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		return "", fmt.Errorf("write default policy bundle to %s: %w", dir, err)
	}
	return dir, nil
}
