package log

import (
	"bytes"
	"testing"

	"github.com/tollgate-dev/tollgate/audit/leaf"
)

// appendAfterFixture appends more to a log opened on a fixture holding
// evs, checks each takes the next sequence, and returns evs and more.
func appendAfterFixture(t *testing.T, l *Log, evs, more []Event) []Event {
	t.Helper()
	for i, ev := range more {
		r, err := l.Append(t.Context(), ev)
		if err != nil {
			t.Fatal(err)
		}
		if want := uint64(len(evs) + i + 1); r.Sequence != want {
			t.Fatalf("%s: sequence %d, want %d", ev.RequestID, r.Sequence, want)
		}
	}
	return append(evs, more...)
}

// checkFixtureEvents checks that evs are in l in order, each with its
// bodies as sent and the leaf's digests of them.
func checkFixtureEvents(t *testing.T, l *Log, evs []Event) {
	t.Helper()
	for i, ev := range evs {
		rec, err := l.Event(ev.RequestID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Leaf.Sequence != uint64(i+1) || rec.BodiesLost || rec.BodiesPruned ||
			!bytes.Equal(rec.RequestBody, ev.RequestBody) || !bytes.Equal(rec.ResponseBody, ev.ResponseBody) {
			t.Fatalf("%s: sequence %d, lost %v, pruned %v, bodies of %d and %d bytes, want sequence %d and bodies of %d and %d",
				ev.RequestID, rec.Leaf.Sequence, rec.BodiesLost, rec.BodiesPruned, len(rec.RequestBody), len(rec.ResponseBody),
				i+1, len(ev.RequestBody), len(ev.ResponseBody))
		}
		if rec.Leaf.RequestSHA256 != leaf.BodyHash(ev.RequestBody) || rec.Leaf.ResponseSHA256 != leaf.BodyHash(ev.ResponseBody) {
			t.Fatalf("%s: the leaf's digests are not those of the bodies sent", ev.RequestID)
		}
	}
}
