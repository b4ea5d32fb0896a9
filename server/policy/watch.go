package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// WatchFile polls the bundle at path every interval and reloads it when it
// changes, until ctx is done; it then returns nil. A poll stats the files
// (names, sizes, modification times; the file itself for a tarball) and
// reads them only when that changed; the bundle is reloaded when its digest
// differs from the active one. A changed bundle that is refused is logged
// and the active bundle stays; it is tried again on its next change. When
// path is not the active bundle's path it is loaded at once.
func (e *Engine) WatchFile(ctx context.Context, path string, interval time.Duration) error {
	if interval <= 0 {
		return fmt.Errorf("policy: watch interval must be positive, got %v", interval)
	}
	// The first poll always compares contents, so a change made between
	// the bundle's load and this call is not missed.
	var last string
	var lastErr error
	if e.Active().path != path {
		_ = e.ReloadFrom(ctx, path) // a refusal is logged by ReloadFrom
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		fp, err := fingerprint(path)
		if err != nil {
			if lastErr == nil || lastErr.Error() != err.Error() {
				e.log.LogAttrs(ctx, slog.LevelWarn, "policy bundle unreadable; active bundle stays",
					slog.String("path", path), slog.String("error", err.Error()))
			}
			lastErr = err
			continue
		}
		if fp == last && lastErr == nil {
			continue
		}
		last, lastErr = fp, nil
		if e.unchanged(path) {
			continue
		}
		_ = e.ReloadFrom(ctx, path) // a refusal is logged by ReloadFrom
	}
}

// unchanged reports whether the bundle at path has the active bundle's
// path and digest, so reloading it would change nothing.
func (e *Engine) unchanged(path string) bool {
	cur := e.Active()
	if cur.path != path {
		return false
	}
	src, err := readSource(path)
	return err == nil && src.digest == cur.digest
}

// fingerprint summarises the names, sizes, modes and modification times of
// the files at path without reading their contents. Symbolic links are
// followed, as the bundle's reader follows them: path itself (a link to the
// bundle directory or tarball, as deployments swap them), and links to files
// inside a directory (not links to directories inside it, which are not
// walked). Where path points is part of the fingerprint, so that
// pointing it elsewhere is seen even if the new target looks the same.
func fingerprint(path string) (string, error) {
	root, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00\n", root)
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := os.Stat(p)
		if err != nil {
			// A dangling link: its own details, as before links were
			// followed; the reader then says what is wrong.
			if info, err = d.Info(); err != nil {
				return err
			}
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00%v\n", p, info.Size(), info.ModTime().UnixNano(), info.Mode())
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
