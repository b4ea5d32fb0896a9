package log

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tollgate-dev/tollgate/audit/leaf"
)

// streamStart returns the start of a stream numbered n for tenant.
func streamStart(n int, tenant string) StreamStart {
	return StreamStart{
		RequestID:        fmt.Sprintf("req_%sstream%d", tenant, n),
		TenantID:         tenant,
		KeyID:            "key_" + tenant,
		Time:             day1.Add(time.Duration(n) * time.Second),
		Endpoint:         "/v1/chat/completions",
		Model:            "builtin/echo",
		PromptTokens:     int64(10 + n),
		PolicyDecisionID: "dec_5d41402abc4b2a76b9719d911017c592",
		RequestBody:      bytes.Repeat(fmt.Appendf(nil, `{"stream":%d}`, n), 20),
	}
}

// crashCopy is the state a crash of e's process would leave now: a copy
// of its files, the journal in the log's directory.
func (e *env) crashCopy(t *testing.T) *env {
	t.Helper()
	c := &env{dir: copyTree(t, e.dir), clock: e.clock, pki: e.pki}
	c.journal = filepath.Join(c.dir, JournalDir)
	c.reopen(t, Options{})
	return c
}

// TestStartedStreamsAreRecordedAfterACrash: a stream whose start was
// recorded and whose event was not is recorded at the next open, as
// interrupted, with what its start knew; a stream that recorded its event
// is recorded once; further opens record nothing more.
func TestStartedStreamsAreRecordedAfterACrash(t *testing.T) {
	// The first event applied, the rest left in the journal (applies an
	// hour apart): the copy is taken with the applier idle, and the open
	// after the crash must replay the finished stream's event before it
	// looks at the markers.
	e := newEnv(t, Options{ApplyInterval: time.Hour})
	ctx := context.Background()
	e.mustAppend(t, event(1, "acme"))
	if err := e.log.apply.caughtUp(); err != nil {
		t.Fatal(err)
	}
	cut, done := streamStart(1, "acme"), streamStart(2, "globex")
	for _, s := range []StreamStart{cut, done} {
		if err := e.log.Start(ctx, s); err != nil {
			t.Fatalf("Start %s: %v", s.RequestID, err)
		}
	}
	fin := event(2, "globex")
	fin.RequestID, fin.TenantID, fin.KeyID = done.RequestID, done.TenantID, done.KeyID
	e.mustAppend(t, fin)

	c := e.crashCopy(t)
	if st := c.log.Stats(); st.Events != 1 || st.Interrupted != 1 || st.Replayed != 1 {
		t.Fatalf("the open after the crash replayed %d events, recorded %d, %d interrupted; want 1 replayed (the finished stream's) and 1 recorded (the cut stream's)",
			st.Replayed, st.Events, st.Interrupted)
	}
	if err := testutil.CollectAndCompare(c.log.Metrics(), strings.NewReader(`
# HELP tollgate_audit_interrupted_streams Streams recorded at start as interrupted (status 599): begun before a crash or stop, never recorded.
# TYPE tollgate_audit_interrupted_streams gauge
tollgate_audit_interrupted_streams 1
`), "tollgate_audit_interrupted_streams"); err != nil {
		t.Error(err)
	}
	r, err := c.log.Event(cut.RequestID)
	if err != nil {
		t.Fatalf("the cut stream has no event: %v", err)
	}
	empty := sha256.Sum256(nil)
	want := leaf.Leaf{
		Schema: leaf.Schema, RequestID: cut.RequestID, Sequence: 3, TenantID: "acme", ApplianceID: "app_test",
		KeyID: cut.KeyID, Time: leaf.FormatTime(cut.Time), Endpoint: cut.Endpoint, Model: cut.Model,
		Status: StatusInterrupted, PromptTokens: cut.PromptTokens, PolicyDecisionID: cut.PolicyDecisionID,
		RequestSHA256: leaf.BodyHash(cut.RequestBody), ResponseSHA256: hexOf(empty[:]), Salt: r.Leaf.Salt,
	}
	if r.Leaf != want {
		t.Errorf("interrupted leaf\n got %+v\nwant %+v", r.Leaf, want)
	}
	if !bytes.Equal(r.RequestBody, cut.RequestBody) || len(r.ResponseBody) != 0 {
		t.Errorf("interrupted bodies: request %q, response %q", r.RequestBody, r.ResponseBody)
	}
	if d, err := c.log.Event(done.RequestID); err != nil || d.Leaf.Status != 200 || d.Leaf.Sequence != 2 {
		t.Errorf("finished stream: %+v, %v; want its one event, status 200, sequence 2", d.Leaf, err)
	}
	if _, err := c.log.Receipt("acme", cut.RequestID); err != nil {
		t.Errorf("receipt of the interrupted event: %v", err)
	}
	c.mustSign(t)
	if _, err := c.log.InclusionProof("acme", r.Day, cut.RequestID, 0); err != nil {
		t.Errorf("inclusion proof of the interrupted event: %v", err)
	}

	// Neither a clean reopen nor a second crash records it again.
	c.reopen(t, Options{})
	again := c.crashCopy(t)
	for _, l := range []*Log{c.log, again.log} {
		if st := l.Stats(); st.Events != 0 || st.Interrupted != 0 {
			t.Errorf("a later open recorded %d events, %d interrupted; want none", st.Events, st.Interrupted)
		}
		r2, err := l.Event(cut.RequestID)
		if err != nil || r2.Leaf.Sequence != 3 {
			t.Errorf("interrupted event after reopen: %+v, %v", r2.Leaf, err)
		}
		next, err := l.Append(ctx, event(9, "acme"))
		if err != nil || next.Sequence != 4 {
			t.Errorf("next append: sequence %d, %v; want 4", next.Sequence, err)
		}
	}
}

// TestStartMarkersAreSpent: markers of streams that recorded their events
// leave the start file once it is rewritten, so it stays bounded by the
// streams in flight; an open stream's marker survives the rewrite.
func TestStartMarkersAreSpent(t *testing.T) {
	was := startsCompactMin
	startsCompactMin = 4 << 10
	t.Cleanup(func() { startsCompactMin = was })
	e := newEnv(t, Options{})
	ctx := context.Background()
	open := streamStart(0, "acme")
	if err := e.log.Start(ctx, open); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(e.journal, StartsFile)
	largest := int64(0)
	for i := 1; i <= 200; i++ {
		s := streamStart(i, "acme")
		if err := e.log.Start(ctx, s); err != nil {
			t.Fatal(err)
		}
		ev := event(i, "acme")
		ev.RequestID = s.RequestID
		e.mustAppend(t, ev)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		largest = max(largest, fi.Size())
	}
	// Each marker is a few hundred bytes: 200 of them are several times
	// the threshold, which a rewrite keeps the file under (twice).
	if largest > 2*startsCompactMin+4<<10 {
		t.Errorf("start file grew to %d bytes, past its bound", largest)
	}
	markers, _, err := readStarts(path)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range markers {
		found = found || m.RequestID == open.RequestID
	}
	if !found {
		t.Fatalf("the open stream's marker is gone from the start file (%d markers)", len(markers))
	}
	if err := e.log.apply.caughtUp(); err != nil { // the copy taken with the applier idle
		t.Fatal(err)
	}
	c := e.crashCopy(t)
	if got := c.log.Stats().Events; got != 1 {
		t.Errorf("recorded %d events after the crash, want 1", got)
	}
	if r, err := c.log.Event(open.RequestID); err != nil || r.Leaf.Status != StatusInterrupted {
		t.Errorf("open stream after the crash: %+v, %v", r.Leaf, err)
	}
}

// TestStartRefusals: a start that could not become a valid event is
// refused before the stream begins, and so is one on a closed log.
func TestStartRefusals(t *testing.T) {
	e := newEnv(t, Options{})
	bad := streamStart(1, "acme")
	bad.RequestID = "not-a-request-id"
	if err := e.log.Start(context.Background(), bad); !errors.Is(err, ErrInvalid) {
		t.Errorf("Start with a bad request id: %v, want ErrInvalid", err)
	}
	if err := e.log.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.log.Start(context.Background(), streamStart(2, "acme")); !errors.Is(err, ErrClosed) {
		t.Errorf("Start on a closed log: %v, want ErrClosed", err)
	}
}

// TestTornStartMarkerIsDropped: a marker cut short by a crash was never
// acknowledged, so no stream began under it: it is dropped, not recorded.
func TestTornStartMarkerIsDropped(t *testing.T) {
	e := newEnv(t, Options{})
	s := streamStart(1, "acme")
	if err := e.log.Start(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	c := copyTree(t, e.dir)
	path := filepath.Join(c, JournalDir, StartsFile)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()-1); err != nil {
		t.Fatal(err)
	}
	ce := &env{dir: c, clock: e.clock, pki: e.pki}
	ce.reopen(t, Options{})
	if _, err := ce.log.Event(s.RequestID); !errors.Is(err, ErrNotFound) {
		t.Errorf("event of a torn marker: %v, want ErrNotFound", err)
	}
}

// TestBeginStartWaitsForTheSync: a begun start is not durable, and its
// Wait does not return, until the start file's sync returned; then the
// marker is in the file, and a crash records the stream as interrupted.
// A failed sync fails the Wait, and no marker of it survives.
func TestBeginStartWaitsForTheSync(t *testing.T) {
	tests := []struct {
		name    string
		syncErr error
	}{
		{name: "synced"},
		{name: "sync failed", syncErr: errors.New("injected start sync failure")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entered, release := make(chan struct{}), make(chan struct{})
			e := newEnv(t, Options{SyncStarts: func(f *os.File) error {
				entered <- struct{}{}
				<-release
				if tt.syncErr != nil {
					return tt.syncErr
				}
				return f.Sync()
			}})
			s := streamStart(1, "acme")
			p, err := e.log.BeginStart(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			<-entered // the marker is written, its sync held
			done, cancel := context.WithCancel(context.Background())
			cancel()
			// The start is not done: Wait can only return the ended
			// context's error.
			if err := p.Wait(done); !errors.Is(err, context.Canceled) {
				t.Fatalf("Wait while the sync is held: %v, want context.Canceled", err)
			}
			close(release)
			err = p.Wait(context.Background())
			if tt.syncErr != nil {
				if err == nil {
					t.Fatal("Wait after a failed sync returned nil")
				}
				markers, _, rerr := readStarts(filepath.Join(e.journal, StartsFile))
				if rerr != nil || len(markers) != 0 {
					t.Fatalf("start file after a failed sync: %d markers, %v; want none", len(markers), rerr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Wait after the sync: %v", err)
			}
			if err := p.Wait(context.Background()); err != nil { // again: the same answer
				t.Fatalf("second Wait: %v", err)
			}
			c := e.crashCopy(t)
			if r, err := c.log.Event(s.RequestID); err != nil || r.Leaf.Status != StatusInterrupted {
				t.Errorf("begun stream after a crash: %+v, %v; want an interrupted event", r.Leaf, err)
			}
		})
	}
}
