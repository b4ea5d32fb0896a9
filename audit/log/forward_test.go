package log

import (
	"bytes"
	"slices"
	"testing"
	"time"
)

// TestForwardReads: Days, Tenants and Leaves give the central plane's
// forwarder each tree's leaves between two heads.
func TestForwardReads(t *testing.T) {
	e := newEnv(t, Options{Retention: 30 * 24 * time.Hour})
	var receipts []Receipt
	for i, tenant := range []string{"acme", "globex", "acme", "acme", "globex"} {
		receipts = append(receipts, e.mustAppend(t, event(i, tenant)))
	}
	e.clock.Advance(24 * time.Hour)
	e.mustAppend(t, event(9, "acme"))
	if days, err := e.log.Days(""); err != nil || !slices.Equal(days, []string{"2026-03-01", "2026-03-02"}) {
		t.Fatalf("Days = %v, %v", days, err)
	}
	if days, err := e.log.Days("2026-03-02"); err != nil || !slices.Equal(days, []string{"2026-03-02"}) {
		t.Fatalf("Days(2026-03-02) = %v, %v", days, err)
	}
	if tenants, err := e.log.Tenants("2026-03-01"); err != nil || !slices.Equal(tenants, []string{"acme", "globex"}) {
		t.Fatalf("Tenants = %v, %v", tenants, err)
	}
	all, err := e.log.Leaves("acme", "2026-03-01", 0, 100)
	if err != nil || len(all) != 3 {
		t.Fatalf("Leaves = %v, %v", all, err)
	}
	for i, r := range []Receipt{receipts[0], receipts[2], receipts[3]} {
		l := all[i]
		if l.Sequence != r.Sequence || l.LeafIndex != r.LeafIndex || !bytes.Equal(l.LeafHash, r.LeafHash) || l.LeafIndex != uint64(i) {
			t.Fatalf("leaf %d = %+v, receipt %+v", i, l, r)
		}
	}
	if all[1].RequestID != "req_acme2" {
		t.Fatalf("request id %s", all[1].RequestID)
	}
	// Between heads of last_sequence 1 and 3: the leaf of sequence 3 only.
	if part, err := e.log.Leaves("acme", "2026-03-01", 1, 3); err != nil || len(part) != 1 || part[0].Sequence != 3 {
		t.Fatalf("Leaves(1, 3) = %v, %v", part, err)
	}
	if e.log.Retention() != 30*24*time.Hour {
		t.Fatalf("Retention = %s", e.log.Retention())
	}
}
