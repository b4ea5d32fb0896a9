package log

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/audit/head"
)

// TestPruneKeepsLeavesAndHeads: a day past retention loses its journal
// (bodies, and a torn tail kept beside it), wherever the journal is, and
// keeps its leaves, heads and proofs.
func TestPruneKeepsLeavesAndHeads(t *testing.T) {
	for _, layout := range journalLayouts {
		t.Run(layout.name, func(t *testing.T) { testPruneKeepsLeavesAndHeads(t, layout.own) })
	}
}

func testPruneKeepsLeavesAndHeads(t *testing.T, own bool) {
	e := newEnv(t, withJournal(t, Options{Retention: 2 * 24 * time.Hour}, own))
	for i := range 3 {
		e.mustAppend(t, event(i, "acme")) // 2026-03-01
	}
	e.clock.Set(time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC))
	e.mustAppend(t, event(3, "acme")) // 2026-03-02
	e.mustSign(t)
	torn := e.journalOf("2026-03-01") + ".torn-5" // as cutTail keeps one
	if err := os.WriteFile(torn, []byte("torn"), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		now    time.Time
		pruned []string
	}{
		{"day 1 ends 2 days later at midnight, not before", time.Date(2026, 3, 3, 23, 59, 59, 0, time.UTC), nil},
		{"day 1 past retention", time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC), []string{"2026-03-01"}},
		{"nothing more until day 2 is", time.Date(2026, 3, 4, 23, 0, 0, 0, time.UTC), nil},
		{"day 2 past retention", time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC), []string{"2026-03-02"}},
	}
	for _, tt := range tests {
		days, err := e.log.Prune(tt.now)
		if err != nil || !slices.Equal(days, tt.pruned) {
			t.Fatalf("%s: Prune = %v, %v; want %v", tt.name, days, err, tt.pruned)
		}
	}
	for _, path := range []string{e.journalOf("2026-03-01"), e.journalOf("2026-03-02"), torn} {
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s of a pruned day: %v", path, err)
		}
	}
	rec, err := e.log.Event("req_acme0")
	if err != nil || !rec.BodiesPruned || rec.RequestBody != nil || rec.Leaf.Sequence != 1 {
		t.Fatalf("pruned event: %+v, %v", rec, err)
	}
	p, err := e.log.InclusionProof("acme", "2026-03-01", "req_acme1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := head.VerifyInclusion(p.Head, p.Leaf, p.LeafIndex, p.Hashes); err != nil {
		t.Fatalf("proof after pruning: %v", err)
	}
}

// TestBodiesPrunedDuringRead: a day pruned after Event found it was not,
// and before it read the bodies, reports them pruned, not lost.
func TestBodiesPrunedDuringRead(t *testing.T) {
	e := newEnv(t, Options{Retention: MinRetention})
	e.mustAppend(t, event(0, "acme"))
	var pruned []string
	var pruneErr error
	testHookReadBodies = func() {
		testHookReadBodies = nil
		pruned, pruneErr = e.log.Prune(time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC))
	}
	t.Cleanup(func() { testHookReadBodies = nil })
	rec, err := e.log.Event("req_acme0")
	if pruneErr != nil || !slices.Equal(pruned, []string{"2026-03-01"}) {
		t.Fatalf("Prune during the read = %v, %v; want 2026-03-01 pruned", pruned, pruneErr)
	}
	if err != nil || !rec.BodiesPruned || rec.BodiesLost || rec.RequestBody != nil || rec.Leaf.Sequence != 1 {
		t.Fatalf("Event: pruned %v, lost %v, request body %q, sequence %d, %v; want its bodies pruned",
			rec.BodiesPruned, rec.BodiesLost, rec.RequestBody, rec.Leaf.Sequence, err)
	}
}

// TestBodiesLost: bodies that do not match their leaf (only possible for an
// append that never returned, after a power loss) are reported, not served.
func TestBodiesLost(t *testing.T) {
	e := newEnv(t, Options{})
	e.mustAppend(t, event(1, "acme"))
	path := e.journalOf("2026-03-01")
	if err := os.WriteFile(path, []byte("garbage garbage garbage garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	rec, err := e.log.Event("req_acme1")
	if err != nil || !rec.BodiesLost || rec.RequestBody != nil {
		t.Fatalf("Event = %+v, %v", rec, err)
	}
}

func TestRetentionBounds(t *testing.T) {
	tests := []struct {
		retention time.Duration
		ok        bool
	}{
		{0, true},
		{24 * time.Hour, true},
		{DefaultRetention, true},
		{MaxRetention, true},
		{MaxRetention + time.Hour, false},
		{8 * 365 * 24 * time.Hour, false},
		{time.Hour, false},
		{-time.Hour, false},
	}
	for _, tt := range tests {
		if err := CheckRetention(tt.retention); (err == nil) != tt.ok {
			t.Errorf("CheckRetention(%s) = %v", tt.retention, err)
		}
		l, err := Open(t.TempDir(), Options{ApplianceID: "app_test", Retention: tt.retention})
		if (err == nil) != tt.ok {
			t.Errorf("Open with retention %s = %v", tt.retention, err)
		}
		if err == nil {
			_ = l.Close()
		}
	}
	if MaxRetention != 2557*24*time.Hour {
		t.Fatalf("MaxRetention = %s", MaxRetention)
	}
	l, err := Open(t.TempDir(), Options{ApplianceID: "app_test"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.opts.Retention != 90*24*time.Hour {
		t.Fatalf("default retention %s", l.opts.Retention)
	}
	if _, err := Open(t.TempDir(), Options{ApplianceID: "bad"}); err == nil || errors.Is(err, ErrClosed) {
		t.Fatalf("Open with a bad appliance id = %v", err)
	}
}
