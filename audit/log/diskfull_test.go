//go:build linux

package log

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/clocktest"
	"github.com/tollgate-dev/tollgate/internal/tmpfstest"
)

// TestDiskFull fills a small tmpfs with appends: once the disk is full
// appends fail with ErrDiskFull (at once, without reaching the disk), the
// log reports it unhealthy, and after space is freed it takes appends
// again without a reopen. Every acknowledged event is read back after a
// reopen; no refused one is there.
func TestDiskFull(t *testing.T) {
	mnt := tmpfstest.Mount(t, 6<<20)
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &env{dir: filepath.Join(mnt, "audit"), clock: clocktest.New(day1), pki: newTestPKI(t, "app_test")}
	e.journal = filepath.Join(e.dir, JournalDir)
	// Only ProbeSpace, called below, ends the full state.
	opts := Options{SpaceProbeInterval: time.Hour}
	e.reopen(t, opts)

	bodies := map[string][]byte{}
	var refused []string
	big := func(n int) Event {
		ev := event(n, "t1")
		ev.RequestBody = make([]byte, 64<<10)
		_, _ = rand.Read(ev.RequestBody) // incompressible
		return ev
	}
	n := 0
	for ; n < 200; n++ {
		ev := big(n)
		_, err := e.log.Append(context.Background(), ev)
		if errors.Is(err, ErrDiskFull) {
			refused = append(refused, ev.RequestID)
			break
		}
		if err != nil {
			t.Fatalf("append %d: %v", n, err)
		}
		bodies[ev.RequestID] = ev.RequestBody
	}
	if len(refused) == 0 {
		t.Fatalf("%d appends of 64 KiB on a 6 MiB disk never failed with ErrDiskFull", n)
	}
	if len(bodies) == 0 {
		t.Fatal("no append succeeded before the disk was full")
	}
	// Full: refused at once, reported, and not a failure of the log.
	ev := event(1000, "t1")
	if _, err := e.log.Append(context.Background(), ev); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("append while full: %v, want ErrDiskFull", err)
	}
	refused = append(refused, ev.RequestID)
	if ok, why := e.log.Healthy(); ok || !strings.Contains(why, "disk is full") {
		t.Fatalf("Healthy while full = %v, %q", ok, why)
	}
	if errors.Is(e.log.failure(), ErrFailed) {
		t.Fatalf("the log failed: %v", e.log.failure())
	}

	// Space returns: appends are taken again, without a reopen.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if !e.log.ProbeSpace() {
		t.Fatal("ProbeSpace after freeing 2 MiB: still full")
	}
	if ok, why := e.log.Healthy(); !ok {
		t.Fatalf("Healthy after space returned: %s", why)
	}
	after := event(2000, "t1")
	e.mustAppend(t, after)
	bodies[after.RequestID] = after.RequestBody

	e.reopen(t, opts)
	for id, body := range bodies {
		r, err := e.log.Event(id)
		if err != nil {
			t.Fatalf("acknowledged %s after reopen: %v", id, err)
		}
		if !bytes.Equal(r.RequestBody, body) {
			t.Fatalf("acknowledged %s: body differs after reopen", id)
		}
	}
	for _, id := range refused {
		if _, err := e.log.Event(id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("refused %s after reopen: %v, want ErrNotFound", id, err)
		}
	}
	t.Logf("%d events acknowledged, %d refused", len(bodies), len(refused))
}

// TestDiskFullApplier fills the disk of audit.db while the journal, on a
// disk of its own, has room: the applier's transaction fails for lack of
// space, the log is full (readers and appends get ErrDiskFull), and once
// space is freed the kept round is applied, without a reopen and without
// losing an acknowledged event.
func TestDiskFullApplier(t *testing.T) {
	mnt := tmpfstest.Mount(t, 4<<20)
	e := &env{dir: filepath.Join(mnt, "audit"), journalOpt: filepath.Join(t.TempDir(), "journal"),
		clock: clocktest.New(day1), pki: newTestPKI(t, "app_test")}
	e.journal = e.journalOpt
	opts := Options{SpaceProbeInterval: time.Hour}
	opts.ApplyInterval = time.Hour
	e.reopen(t, opts)
	// The first round after an open runs at once: have it run now, so
	// that the next one is the one a reader below asks for.
	first := event(9999, "t1")
	e.mustAppend(t, first)
	if _, err := e.log.Event(first.RequestID); err != nil {
		t.Fatal(err)
	}

	// Fill what is left of the disk.
	filler, err := os.Create(filepath.Join(mnt, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	page := make([]byte, 4096)
	for {
		if _, err := filler.Write(page); err != nil {
			break
		}
	}
	_ = filler.Close()

	var ids []string
	for n := range 2000 {
		ev := event(n, "t1")
		e.mustAppend(t, ev) // the journal has room
		ids = append(ids, ev.RequestID)
	}
	// Reading waits for the applier, whose transaction finds no room.
	if _, err := e.log.Event(ids[0]); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Event with audit.db's disk full: %v, want ErrDiskFull", err)
	}
	if _, err := e.log.Append(context.Background(), event(5000, "t1")); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("append with audit.db's disk full: %v, want ErrDiskFull", err)
	}
	if err := e.log.failure(); err != nil {
		t.Fatalf("the log failed: %v", err)
	}

	if err := os.Remove(filler.Name()); err != nil {
		t.Fatal(err)
	}
	if !e.log.ProbeSpace() {
		t.Fatal("ProbeSpace after freeing the disk: still full")
	}
	for _, id := range ids {
		if _, err := e.log.Event(id); err != nil {
			t.Fatalf("acknowledged %s once space returned: %v", id, err)
		}
	}
	e.mustAppend(t, event(6000, "t1"))
	e.reopen(t, opts)
	for _, id := range ids {
		if _, err := e.log.Event(id); err != nil {
			t.Fatalf("acknowledged %s after reopen: %v", id, err)
		}
	}
}
