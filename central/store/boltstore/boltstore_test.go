package boltstore_test

import (
	"path/filepath"
	"testing"

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
