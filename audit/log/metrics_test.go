package log

import (
	"strings"
	"testing"

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
	if n := testutil.CollectAndCount(e.log.Metrics()); n != 7 {
		t.Fatalf("%d metrics, want 7", n)
	}
}
