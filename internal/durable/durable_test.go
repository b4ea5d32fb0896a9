package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestCreateAndReplace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := Create(path, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Create(path, []byte("two"), 0o600); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Create over an existing file = %v, want ErrExist", err)
	}
	if err := Replace(path, []byte("three"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "three" {
		t.Fatalf("content %q, %v", got, err)
	}
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", info.Mode())
	}
	if err := SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("SyncDir of a missing directory succeeded")
	}
}

// TestMkdirAllSyncsNewNames: every directory MkdirAll creates has its name
// synced in its parent, outermost first; existing ones are left alone.
func TestMkdirAllSyncsNewNames(t *testing.T) {
	root := t.TempDir()
	var synced []string
	syncNewName = func(dir string) error {
		synced = append(synced, dir)
		return SyncDir(dir)
	}
	t.Cleanup(func() { syncNewName = SyncDir })
	deep := filepath.Join(root, "a", "b", "c")
	if err := MkdirAll(deep, 0o700); err != nil {
		t.Fatal(err)
	}
	want := []string{root, filepath.Join(root, "a"), filepath.Join(root, "a", "b")}
	if !slices.Equal(synced, want) {
		t.Fatalf("synced %v, want %v", synced, want)
	}
	if info, err := os.Stat(deep); err != nil || !info.IsDir() || info.Mode().Perm() != 0o700 {
		t.Fatalf("created %v, %v", info, err)
	}
	synced = nil
	if err := MkdirAll(deep, 0o700); err != nil || len(synced) != 0 {
		t.Fatalf("MkdirAll of an existing directory = %v, synced %v", err, synced)
	}
	file := filepath.Join(root, "file")
	if err := Create(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAll(filepath.Join(file, "sub"), 0o700); err == nil {
		t.Fatal("MkdirAll under a file succeeded")
	}
}
