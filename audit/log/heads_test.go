package log

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/internal/lockedbuf"
)

// TestInterleavedTenants: with two tenants interleaved, each tenant's head
// counts only its own leaves while last_sequence is appliance-wide, so
// event_count < last_sequence for both; roots match the module's reference
// tree over the stored leaves.
func TestInterleavedTenants(t *testing.T) {
	e := newEnv(t, Options{})
	ref := map[string]*testonly.Tree{"acme": testonly.New(rfc6962.DefaultHasher), "globex": testonly.New(rfc6962.DefaultHasher)}
	order := []string{"acme", "globex", "globex", "acme", "globex", "acme", "acme", "globex"}
	for i, tenant := range order {
		ev := event(i, tenant)
		e.mustAppend(t, ev)
		rec, err := e.log.Event(ev.RequestID)
		if err != nil {
			t.Fatal(err)
		}
		ref[tenant].AppendData(rec.LeafBytes)
	}
	heads := e.mustSign(t)
	if len(heads) != 2 {
		t.Fatalf("%d heads, want 2", len(heads))
	}
	want := map[string][2]uint64{"acme": {4, 7}, "globex": {4, 8}}
	for _, h := range heads {
		if err := head.Verify(h, e.pki.ca); err != nil {
			t.Fatal(err)
		}
		if got := [2]uint64{h.EventCount, h.LastSequence}; got != want[h.TenantID] {
			t.Errorf("%s: event_count, last_sequence = %v, want %v", h.TenantID, got, want[h.TenantID])
		}
		if h.EventCount >= h.LastSequence {
			t.Errorf("%s: event_count %d not below last_sequence %d", h.TenantID, h.EventCount, h.LastSequence)
		}
		if h.MerkleRoot != hex.EncodeToString(ref[h.TenantID].Hash()) {
			t.Errorf("%s: root %s differs from the reference tree", h.TenantID, h.MerkleRoot)
		}
		if h.ApplianceID != "app_test" || h.Day != "2026-03-01" || h.SignedAt != "2026-03-01T12:00:00Z" {
			t.Errorf("head %+v", h)
		}
	}
	if again := e.mustSign(t); len(again) != 0 {
		t.Fatalf("SignHeads signed %d heads for trees that did not grow", len(again))
	}
}

// TestNewHeadExtendsPrevious: every head of a day is consistent with the
// one before it.
func TestNewHeadExtendsPrevious(t *testing.T) {
	e := newEnv(t, Options{})
	n := 0
	for _, batch := range []int{1, 2, 5, 1, 8, 13} {
		for range batch {
			e.mustAppend(t, event(n, "acme"))
			n++
		}
		e.clock.Advance(time.Minute)
		e.mustSign(t)
	}
	heads, err := e.log.Heads("acme", "2026-03-01")
	if err != nil {
		t.Fatal(err)
	}
	if len(heads) != 6 || heads[5].EventCount != uint64(n) {
		t.Fatalf("%d heads, last of size %d", len(heads), heads[len(heads)-1].EventCount)
	}
	for i := 1; i < len(heads); i++ {
		older, newer := heads[i-1], heads[i]
		p, err := e.log.ConsistencyProof("acme", "2026-03-01", older.EventCount, newer.EventCount)
		if err != nil {
			t.Fatal(err)
		}
		if err := head.VerifyConsistency(older, newer, p); err != nil {
			t.Fatalf("head %d does not extend head %d: %v", i, i-1, err)
		}
	}
	latest, err := e.log.Head("acme", "2026-03-01")
	if err != nil || latest != heads[5] {
		t.Fatalf("Head = %+v, %v", latest, err)
	}
}

func TestInclusionProof(t *testing.T) {
	e := newEnv(t, Options{})
	for i := range 11 {
		e.mustAppend(t, event(i, []string{"acme", "globex"}[i%3/2]))
	}
	e.mustSign(t)
	e.mustAppend(t, event(99, "acme")) // after the head
	for i := range 11 {
		tenant := []string{"acme", "globex"}[i%3/2]
		p, err := e.log.InclusionProof(tenant, "2026-03-01", event(i, tenant).RequestID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := head.Verify(p.Head, e.pki.ca); err != nil {
			t.Fatal(err)
		}
		root, _ := p.Head.Root()
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, p.LeafIndex, p.Head.EventCount, p.LeafHash, p.Hashes, root); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if err := head.VerifyInclusion(p.Head, p.Leaf, p.LeafIndex, p.Hashes); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	tests := []struct {
		name, tenant, day, request string
		size                       uint64
		want                       error
	}{
		{"not yet covered", "acme", "2026-03-01", "req_acme99", 0, ErrNotCovered},
		{"other tenant", "globex", "2026-03-01", "req_acme0", 0, ErrNotFound},
		{"other day", "acme", "2026-02-28", "req_acme0", 0, ErrNotFound},
		{"unknown request", "acme", "2026-03-01", "req_nope", 0, ErrNotFound},
		{"no head of that size", "acme", "2026-03-01", "req_acme0", 3, ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := e.log.InclusionProof(tt.tenant, tt.day, tt.request, tt.size); !errors.Is(err, tt.want) {
				t.Fatalf("InclusionProof = %v, want %v", err, tt.want)
			}
		})
	}
	// A proof against an older head of a given size.
	e.mustSign(t)
	first, _ := e.log.Heads("acme", "2026-03-01")
	p, err := e.log.InclusionProof("acme", "2026-03-01", "req_acme0", first[0].EventCount)
	if err != nil || p.Head != first[0] {
		t.Fatalf("proof against the first head: %v", err)
	}
	if err := head.VerifyInclusion(p.Head, p.Leaf, p.LeafIndex, p.Hashes); err != nil {
		t.Fatal(err)
	}
}

// TestProofAgainstEachHead proves an event against every head by its size:
// the head found is the latest when the size is the latest's (the final
// head of a tree that did not grow repeats the size of the one before),
// else the first of that size, and a size no head has, between two heads'
// or past the last, is ErrNotFound.
func TestProofAgainstEachHead(t *testing.T) {
	e := newEnv(t, Options{})
	const heads = 9
	n := 0
	for i := range heads {
		e.mustAppend(t, event(n, "acme"))
		n++
		if i == 4 { // two events between heads: no head has size 5
			e.mustAppend(t, event(n, "acme"))
			n++
		}
		e.clock.Advance(time.Minute)
		e.mustSign(t)
		e.mustAppend(t, event(100+i, "globex")) // another tree, interleaved
	}
	if _, err := e.log.FinalizeDay("2026-03-01", time.Date(2026, 3, 2, 0, 1, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	all, err := e.log.Heads("acme", "2026-03-01")
	if err != nil || len(all) != heads+1 || !all[heads].Final() || all[heads].EventCount != uint64(n) {
		t.Fatalf("heads %+v, %v", all, err)
	}
	for i, h := range all[:heads] {
		if i == heads-1 {
			h = all[heads] // the final head, of the same size
		}
		p, err := e.log.InclusionProof("acme", "2026-03-01", "req_acme0", h.EventCount)
		if err != nil || p.Head != h {
			t.Fatalf("size %d: head %+v, %v; want %+v", h.EventCount, p.Head, err, h)
		}
		if err := head.VerifyInclusion(p.Head, p.Leaf, p.LeafIndex, p.Hashes); err != nil {
			t.Fatalf("size %d: %v", h.EventCount, err)
		}
	}
	if p, err := e.log.InclusionProof("acme", "2026-03-01", "req_acme0", 0); err != nil || p.Head != all[heads] {
		t.Fatalf("latest: %+v, %v", p.Head, err)
	}
	for _, size := range []uint64{5, uint64(n) + 1} {
		if _, err := e.log.InclusionProof("acme", "2026-03-01", "req_acme0", size); !errors.Is(err, ErrNotFound) {
			t.Fatalf("size %d, which no head has: %v", size, err)
		}
	}
}

// TestProofsAfterOneLargeRound: events of four tenants, appended
// concurrently and applied to audit.db in a single round, each get an
// inclusion proof that verifies against their tenant's signed head. The
// proof's hashes come from the tree nodes the round stored (sorted across
// tenants and levels before they are put), the head's root from the
// applier's in-memory ranges: a node stored under the wrong key or lost
// fails the proof.
func TestProofsAfterOneLargeRound(t *testing.T) {
	const perTenant = 150
	tenants := []string{"acme", "globex", "initech", "umbrella"}
	e := newEnv(t, Options{})
	e.mustAppend(t, event(0, "warmup")) // the applier's first round runs at once
	e.mustSign(t)
	before := e.log.Stats().Applies
	var wg sync.WaitGroup
	for _, tenant := range tenants {
		for i := range perTenant {
			wg.Go(func() { e.mustAppend(t, event(i, tenant)) })
		}
	}
	wg.Wait()
	heads := e.mustSign(t)
	if got := e.log.Stats().Applies - before; got != 1 {
		t.Fatalf("%d applier rounds, want 1", got)
	}
	if len(heads) != len(tenants) {
		t.Fatalf("%d heads, want %d (the tenants that grew)", len(heads), len(tenants))
	}
	for _, tenant := range tenants {
		for i := range perTenant {
			p, err := e.log.InclusionProof(tenant, "2026-03-01", event(i, tenant).RequestID, 0)
			if err != nil {
				t.Fatal(err)
			}
			if p.Head.EventCount != perTenant {
				t.Fatalf("%s: head of %d events, want %d", tenant, p.Head.EventCount, perTenant)
			}
			if err := head.VerifyInclusion(p.Head, p.Leaf, p.LeafIndex, p.Hashes); err != nil {
				t.Fatalf("%s event %d (leaf %d): %v", tenant, i, p.LeafIndex, err)
			}
		}
	}
}

// TestDayRollover: sequences restart at 1 on a new UTC day; the first
// SignHeads of the new day signs a final head for the closed day, signed
// after its end and consistent with its last head; nothing joins it later.
func TestDayRollover(t *testing.T) {
	e := newEnv(t, Options{})
	e.clock.Set(time.Date(2026, 3, 1, 23, 59, 0, 0, time.UTC))
	e.mustAppend(t, event(1, "acme"))
	e.mustAppend(t, event(2, "acme"))
	e.mustSign(t)
	e.mustAppend(t, event(3, "acme")) // grows after the interval head
	e.mustAppend(t, event(4, "globex"))
	e.clock.Set(time.Date(2026, 3, 2, 0, 0, 30, 0, time.UTC))
	if r := e.mustAppend(t, event(5, "acme")); r.Day != "2026-03-02" || r.Sequence != 1 || r.LeafIndex != 0 {
		t.Fatalf("first event of the new day: %+v", r)
	}
	if _, err := e.log.FinalizeDay("2026-03-02", e.clock.Now()); !errors.Is(err, ErrDayOpen) {
		t.Fatalf("FinalizeDay of the open day = %v", err)
	}
	heads := e.mustSign(t)
	if len(heads) != 3 {
		t.Fatalf("%d heads, want final acme and globex of 03-01, then acme of 03-02", len(heads))
	}
	for _, h := range heads[:2] {
		if h.Day != "2026-03-01" || !h.Final() || h.SignedAt != "2026-03-02T00:00:30Z" {
			t.Fatalf("final head %+v", h)
		}
		if err := head.Verify(h, e.pki.ca); err != nil {
			t.Fatal(err)
		}
	}
	acme, _ := e.log.Heads("acme", "2026-03-01")
	if len(acme) != 2 || acme[1].EventCount != 3 || acme[1].LastSequence != 3 {
		t.Fatalf("acme heads of 03-01: %+v", acme)
	}
	p, err := e.log.ConsistencyProof("acme", "2026-03-01", acme[0].EventCount, acme[1].EventCount)
	if err != nil {
		t.Fatal(err)
	}
	if err := head.VerifyConsistency(acme[0], acme[1], p); err != nil {
		t.Fatal(err)
	}
	if h := heads[2]; h.Day != "2026-03-02" || h.Final() || h.EventCount != 1 {
		t.Fatalf("head of the new day %+v", h)
	}
	e.clock.Advance(time.Hour)
	if again := e.mustSign(t); len(again) != 0 {
		t.Fatalf("signed %d more heads", len(again))
	}
	if again, err := e.log.FinalizeDay("2026-03-01", e.clock.Now()); err != nil || len(again) != 0 {
		t.Fatalf("FinalizeDay of a final day = %d heads, %v", len(again), err)
	}
}

// TestFinalHeadWithoutGrowth: a day whose last interval head already
// covers every event still gets a final head, signed after the day ended.
func TestFinalHeadWithoutGrowth(t *testing.T) {
	e := newEnv(t, Options{})
	e.mustAppend(t, event(1, "acme"))
	e.mustSign(t)
	heads, err := e.log.FinalizeDay("2026-03-01", time.Date(2026, 3, 2, 0, 1, 0, 0, time.UTC))
	if err != nil || len(heads) != 1 || !heads[0].Final() || heads[0].EventCount != 1 {
		t.Fatalf("FinalizeDay = %+v, %v", heads, err)
	}
	// The day is closed: an append with a clock still in it joins the next day.
	if r := e.mustAppend(t, event(2, "acme")); r.Day != "2026-03-02" || r.Sequence != 1 {
		t.Fatalf("append after close: %+v", r)
	}
}

// TestClockGoingBackKeepsTheOpenDay: the open day never moves back.
func TestClockGoingBackKeepsTheOpenDay(t *testing.T) {
	e := newEnv(t, Options{})
	e.clock.Set(time.Date(2026, 3, 2, 0, 0, 1, 0, time.UTC))
	e.mustAppend(t, event(1, "acme"))
	e.clock.Set(time.Date(2026, 3, 1, 23, 59, 59, 0, time.UTC))
	if r := e.mustAppend(t, event(2, "acme")); r.Day != "2026-03-02" || r.Sequence != 2 {
		t.Fatalf("append with the clock behind: %+v", r)
	}
	e.reopen(t, Options{})
	if r := e.mustAppend(t, event(3, "acme")); r.Day != "2026-03-02" || r.Sequence != 3 {
		t.Fatalf("append after restart with the clock behind: %+v", r)
	}
}

// TestClockJumpAheadAndBack: after one append with the clock a day ahead,
// later appends join that day (the open day never moves back) while the
// clock is back in the day before. SignHeads still signs the earlier day's
// trees, and skips the later day's with one warning per call, a head being
// never signed before its day; once the clock reaches that day, the earlier
// day is finalized and the later one signed as usual.
func TestClockJumpAheadAndBack(t *testing.T) {
	var logs lockedbuf.Buffer
	e := newEnv(t, Options{Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	e.mustAppend(t, event(1, "acme"))
	e.mustAppend(t, event(2, "globex"))
	e.clock.Set(day1.AddDate(0, 0, 1)) // a jump of a day, for one append
	if r := e.mustAppend(t, event(3, "acme")); r.Day != "2026-03-02" {
		t.Fatalf("append with the clock ahead: %+v", r)
	}
	e.clock.Set(day1.Add(time.Second)) // back
	for i, tenant := range []string{"acme", "initech"} {
		if r := e.mustAppend(t, event(4+i, tenant)); r.Day != "2026-03-02" {
			t.Fatalf("append with the clock back: %+v", r)
		}
	}
	heads := e.mustSign(t)
	if len(heads) != 2 {
		t.Fatalf("%d heads, want acme and globex of 03-01: %+v", len(heads), heads)
	}
	for i, tenant := range []string{"acme", "globex"} {
		if h := heads[i]; h.TenantID != tenant || h.Day != "2026-03-01" || h.Final() || h.EventCount != 1 || h.SignedAt != "2026-03-01T12:00:01Z" {
			t.Fatalf("head %d: %+v", i, h)
		}
	}
	// One warning of the clock; a loaded machine may add "slow commit"
	// warnings, which say nothing of the clock and are skipped.
	var clockWarnings []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if !strings.Contains(line, `"audit log: slow commit"`) {
			clockWarnings = append(clockWarnings, line)
		}
	}
	var warn struct{ Level, Msg, Day, Tenant, Now string }
	if len(clockWarnings) != 1 {
		t.Fatalf("log: %s", logs.String())
	} else if err := json.Unmarshal([]byte(clockWarnings[0]), &warn); err != nil || warn.Level != "WARN" ||
		warn.Day != "2026-03-02" || warn.Tenant != "acme" || warn.Now != "2026-03-01T12:00:01Z" {
		t.Fatalf("warning %+v (%v)", warn, err)
	}
	if _, err := e.log.Head("acme", "2026-03-02"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a head of 03-02 at 03-01: %v", err)
	}
	e.clock.Set(time.Date(2026, 3, 2, 0, 0, 5, 0, time.UTC))
	heads = e.mustSign(t)
	if len(heads) != 4 {
		t.Fatalf("%d heads, want final acme and globex of 03-01, then acme and initech of 03-02: %+v", len(heads), heads)
	}
	want := []struct {
		tenant, day string
		final       bool
		size        uint64
	}{{"acme", "2026-03-01", true, 1}, {"globex", "2026-03-01", true, 1}, {"acme", "2026-03-02", false, 2}, {"initech", "2026-03-02", false, 1}}
	for i, w := range want {
		if h := heads[i]; h.TenantID != w.tenant || h.Day != w.day || h.Final() != w.final || h.EventCount != w.size {
			t.Fatalf("head %d: %+v", i, h)
		}
	}
	e.mustAppend(t, event(6, "acme"))
	e.clock.Advance(time.Minute)
	e.mustSign(t)
	for _, tree := range [][2]string{{"acme", "2026-03-01"}, {"globex", "2026-03-01"}, {"acme", "2026-03-02"}, {"initech", "2026-03-02"}} {
		hs, err := e.log.Heads(tree[0], tree[1])
		if err != nil {
			t.Fatal(err)
		}
		for i, h := range hs {
			if err := head.Verify(h, e.pki.ca); err != nil {
				t.Fatalf("%s head %d: %v", tree, i, err)
			}
			if i == 0 {
				continue
			}
			p, err := e.log.ConsistencyProof(tree[0], tree[1], hs[i-1].EventCount, h.EventCount)
			if err != nil {
				t.Fatal(err)
			}
			if err := head.VerifyConsistency(hs[i-1], h, p); err != nil {
				t.Fatalf("%s heads %d and %d: %v", tree, i-1, i, err)
			}
		}
	}
	for n, tenant := range map[int]string{3: "acme", 4: "acme", 5: "initech", 6: "acme"} {
		p, err := e.log.InclusionProof(tenant, "2026-03-02", event(n, tenant).RequestID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := head.VerifyInclusion(p.Head, p.Leaf, p.LeafIndex, p.Hashes); err != nil {
			t.Fatalf("event %d: %v", n, err)
		}
	}
}

func TestNoSigner(t *testing.T) {
	l, err := Open(t.TempDir(), Options{ApplianceID: "app_test"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.SignHeads(day1); !errors.Is(err, ErrNoSigner) {
		t.Fatalf("SignHeads = %v", err)
	}
	if _, err := l.Head("acme", "2026-03-01"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Head = %v", err)
	}
}

// TestFinalizeDayInOrder: finalizing a day finalizes the earlier open ones
// first, so that every closed day ends with a final head.
func TestFinalizeDayInOrder(t *testing.T) {
	e := newEnv(t, Options{})
	e.mustAppend(t, event(1, "acme")) // 03-01
	e.clock.Set(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	e.mustAppend(t, event(2, "acme")) // 03-02
	heads, err := e.log.FinalizeDay("2026-03-02", time.Date(2026, 3, 3, 0, 0, 1, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if len(heads) != 2 || heads[0].Day != "2026-03-01" || heads[1].Day != "2026-03-02" || !heads[0].Final() || !heads[1].Final() {
		t.Fatalf("final heads %+v", heads)
	}
}
