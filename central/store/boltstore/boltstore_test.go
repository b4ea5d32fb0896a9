package boltstore_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/tollgate-dev/tollgate/central/store"
	"github.com/tollgate-dev/tollgate/central/store/boltstore"
	"github.com/tollgate-dev/tollgate/central/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := boltstore.Open(filepath.Join(t.TempDir(), "central.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func BenchmarkProof(b *testing.B) {
	s, err := boltstore.Open(filepath.Join(b.TempDir(), "central.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchmarkProofs(b, s, 100_000)
}

// A store another process has open is reported as locked, not as a bare
// "timeout".
func TestOpenLockedReportsLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "central.db")
	s, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	boltstore.SetLockTimeout(t, 50*time.Millisecond)
	// bbolt's lock is a flock: a second open file, even in this process,
	// waits for it as another process would.
	_, err = boltstore.Open(path)
	if !errors.Is(err, bolterrors.ErrTimeout) {
		t.Fatalf("Open of a store in use: %v, want bbolt ErrTimeout", err)
	}
	if !strings.Contains(err.Error(), "locked by another process") {
		t.Fatalf("error %q does not say the file is locked", err)
	}
}

// BenchmarkHeadStorage: the bytes a stored head takes in the file (pages
// in use, free pages not counted).
func BenchmarkHeadStorage(b *testing.B) {
	s, err := boltstore.Open(filepath.Join(b.TempDir(), "central.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchmarkHeadStorage(b, s, s.UsedBytes)
}

// BenchmarkLeafStorage: the bytes a stored leaf takes in the file, with
// its request index and nodes (pages in use, free pages not counted).
func BenchmarkLeafStorage(b *testing.B) {
	s, err := boltstore.Open(filepath.Join(b.TempDir(), "central.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchmarkLeafStorage(b, s, s.UsedBytes)
}

func BenchmarkConsistency(b *testing.B) {
	s, err := boltstore.Open(filepath.Join(b.TempDir(), "central.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchmarkConsistency(b, s)
}
