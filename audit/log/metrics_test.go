package log

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetrics(t *testing.T) {
	e := newEnv(t, Options{})
	for i := range 3 {
		e.mustAppend(t, event(i, "acme"))
	}
	if _, err := e.log.Event("req_acme2"); err != nil { // waits for the applier
		t.Fatal(err)
	}
	want := `
# HELP tollgate_audit_apply_backlog_events Events journaled and acknowledged but not yet applied to audit.db.
# TYPE tollgate_audit_apply_backlog_events gauge
tollgate_audit_apply_backlog_events 0
# HELP tollgate_audit_events_total Audit events durably journaled and acknowledged since start.
# TYPE tollgate_audit_events_total counter
tollgate_audit_events_total 3
# HELP tollgate_audit_failed 1 when a failed write, sync or apply makes the log refuse appends until restarted.
# TYPE tollgate_audit_failed gauge
tollgate_audit_failed 0
`
	if err := testutil.CollectAndCompare(e.log.Metrics(), strings.NewReader(want),
		"tollgate_audit_events_total", "tollgate_audit_apply_backlog_events", "tollgate_audit_failed"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(e.log.Metrics()); n != 13 {
		t.Fatalf("%d metrics, want 13", n)
	}
}

// TestMetricsBytes: the bodies' bytes as sent and as stored, and the
// journal's, count what was acknowledged.
func TestMetricsBytes(t *testing.T) {
	e := newEnv(t, Options{})
	evs := []Event{event(0, "acme"), streamFor(1, "acme", 500)}
	var sent uint64
	for _, ev := range evs {
		e.mustAppend(t, ev)
		sent += uint64(len(ev.RequestBody) + len(ev.ResponseBody))
	}
	if _, err := e.log.Append(t.Context(), evs[1]); err == nil { // a duplicate: not journaled
		t.Fatal("duplicate appended")
	}
	st := e.log.Stats()
	e.log.writeMu.Lock()
	end := e.log.w.end
	e.log.writeMu.Unlock()
	var stored uint64
	for _, f := range readFrames(t, e.journalOf("2026-03-01")) {
		stored += f.e.storedLen
	}
	if st.BodyBytes != sent || st.StoredBodyBytes != stored || st.JournalBytes != end {
		t.Fatalf("stats: bodies %d sent, %d stored, journal %d; want %d, %d, %d", st.BodyBytes, st.StoredBodyBytes, st.JournalBytes, sent, stored, end)
	}
	if stored*10 > sent {
		t.Fatalf("%d bytes of bodies stored in %d: not compressed", sent, stored)
	}
	want := fmt.Sprintf(`
# HELP tollgate_audit_body_bytes_total Bytes of the acknowledged events' request and response bodies as received and sent, since start.
# TYPE tollgate_audit_body_bytes_total counter
tollgate_audit_body_bytes_total %d
# HELP tollgate_audit_journal_bytes_total Bytes of journal frames (leaves and stored bodies) written for acknowledged events, since start.
# TYPE tollgate_audit_journal_bytes_total counter
tollgate_audit_journal_bytes_total %d
# HELP tollgate_audit_stored_body_bytes_total Bytes the same bodies take in the journal (compressed), since start.
# TYPE tollgate_audit_stored_body_bytes_total counter
tollgate_audit_stored_body_bytes_total %d
`, sent, end, stored)
	if err := testutil.CollectAndCompare(e.log.Metrics(), strings.NewReader(want),
		"tollgate_audit_body_bytes_total", "tollgate_audit_stored_body_bytes_total", "tollgate_audit_journal_bytes_total"); err != nil {
		t.Fatal(err)
	}
}

// TestMetricsDurations: every Append is observed, a refused one too, and
// every batch's journal sync; both in seconds.
func TestMetricsDurations(t *testing.T) {
	e := newEnv(t, Options{})
	e.mustAppend(t, event(0, "acme"))
	e.mustAppend(t, event(1, "acme"))
	if _, err := e.log.Append(t.Context(), event(1, "acme")); err == nil {
		t.Fatal("duplicate appended")
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(e.log.Metrics())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{
		"tollgate_audit_append_seconds": 3,
		"tollgate_audit_sync_seconds":   e.log.Stats().Commits, // the duplicate committed nothing
	}
	if want["tollgate_audit_sync_seconds"] != 2 {
		t.Fatalf("%d commits, want 2", want["tollgate_audit_sync_seconds"])
	}
	for _, f := range families {
		n, ok := want[f.GetName()]
		if !ok {
			continue
		}
		delete(want, f.GetName())
		h := f.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != n {
			t.Fatalf("%s: %d observed, want %d", f.GetName(), h.GetSampleCount(), n)
		}
		// Each took more than a microsecond (a durable append syncs) and
		// less than a minute: the unit is seconds.
		if s := h.GetSampleSum(); s <= float64(n)*1e-6 || s >= 60 {
			t.Fatalf("%s: sum %g s", f.GetName(), s)
		}
	}
	if len(want) != 0 {
		t.Fatalf("not collected: %v", want)
	}
}
