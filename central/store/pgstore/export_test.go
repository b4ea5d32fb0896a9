package pgstore

import "testing"

// SetAfterPruneScan runs f between Prune's scan for expired leaves and its
// deletions, until the test ends.
func SetAfterPruneScan(t *testing.T, f func()) {
	afterPruneScan = f
	t.Cleanup(func() { afterPruneScan = nil })
}
