//go:build unix

package log

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/audit/head"
)

// crashDirEnv, when set, makes the test binary the crash child: it appends
// to the log in that directory until killed (see TestCrashRecovery).
const crashDirEnv = "TOLLGATE_AUDIT_CRASH_DIR"

// crashSyncsEnv is the child's MaxSyncsInFlight.
const crashSyncsEnv = "TOLLGATE_AUDIT_CRASH_SYNCS"

// crashJournalEnv is the child's JournalDir (empty: the default).
const crashJournalEnv = "TOLLGATE_AUDIT_CRASH_JOURNAL"

// crashTenants are the tenants the child's writers append for.
var crashTenants = []string{"acme", "globex", "initech"}

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		crashChild(dir)
		return
	}
	os.Exit(m.Run())
}

// crashChild appends from several goroutines and prints "ack <request id>
// <sequence>" once Append has returned, and "head <json>" once SignHeads
// has stored a head, until it is killed.
func crashChild(dir string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	app, err := fleet.LoadAppliance(filepath.Join(dir, fleet.ApplianceCertFile), filepath.Join(dir, fleet.ApplianceKeyFile))
	if err != nil {
		fail(err)
	}
	// Apply to audit.db only when heads are signed (or the backlog is
	// large), so that the kill leaves journaled events for Open to replay.
	syncs, _ := strconv.Atoi(os.Getenv(crashSyncsEnv))
	l, err := Open(filepath.Join(dir, "log"), Options{Signer: app, Now: func() time.Time { return day1 },
		ApplyInterval: time.Hour, MaxSyncsInFlight: syncs, JournalDir: os.Getenv(crashJournalEnv)})
	if err != nil {
		fail(err)
	}
	var outMu sync.Mutex
	emit := func(line string) {
		outMu.Lock()
		defer outMu.Unlock()
		if _, err := io.WriteString(os.Stdout, line+"\n"); err != nil {
			fail(err)
		}
	}
	var acked atomic.Int64
	for w := range 6 {
		go func() {
			for i := 0; ; i++ {
				ev := event(i, crashTenants[(w+i)%len(crashTenants)])
				ev.RequestID = fmt.Sprintf("req_w%dn%d", w, i)
				r, err := l.Append(context.Background(), ev)
				if err != nil {
					fail(err)
				}
				acked.Add(1)
				emit(fmt.Sprintf("ack %s %d", ev.RequestID, r.Sequence))
			}
		}()
	}
	for last := int64(0); ; {
		if n := acked.Load(); n-last < 100 {
			time.Sleep(time.Millisecond) // pace head signing; no assertion depends on it
			continue
		} else {
			last = n
		}
		heads, err := l.SignHeads(day1)
		if err != nil {
			fail(err)
		}
		for _, h := range heads {
			raw, _ := json.Marshal(h)
			emit("head " + string(raw))
		}
	}
}

// TestCrashRecovery SIGKILLs a process appending to the log and checks,
// on the same data: every acknowledged event is present with its sequence
// and its bodies (checked against the leaf's digests),
// sequences are contiguous from 1, and the head signed after the restart
// verifies and is consistent with the last head signed before the kill.
func TestCrashRecovery(t *testing.T) {
	// Also with overlapping syncs, whose batches must still be
	// acknowledged in order, and with the journal in a directory of its
	// own, from which the reopen must replay.
	for _, tc := range []struct {
		syncs      int
		ownJournal bool
	}{{1, false}, {3, false}, {1, true}} {
		name := fmt.Sprintf("syncs=%d", tc.syncs)
		if tc.ownJournal {
			name += "/own journal directory"
		}
		t.Run(name, func(t *testing.T) { testCrashRecovery(t, tc.syncs, tc.ownJournal) })
	}
}

func testCrashRecovery(t *testing.T, syncs int, ownJournal bool) {
	dir := t.TempDir()
	journal := ""
	if ownJournal {
		journal = filepath.Join(t.TempDir(), "journal")
	}
	pki := newTestPKI(t, "app_crash")
	keyPEM, err := encodeTestKey(pki.app)
	if err != nil {
		t.Fatal(err)
	}
	if err := fleet.SaveAppliance(dir, pki.app.CertPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	acks, lastHeads := runCrashChild(t, dir, syncs, journal, 3000, 4)

	l, err := Open(filepath.Join(dir, "log"), Options{Signer: pki.app, Now: func() time.Time { return day1 }, JournalDir: journal})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Stats().Replayed == 0 {
		t.Fatal("nothing was replayed from the journal: the kill did not test recovery")
	}
	if ownJournal {
		days, err := journalDays(journal)
		if err != nil || !slices.Equal(days, []string{"2026-03-01"}) {
			t.Fatalf("journal days in %s: %v, %v", journal, days, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "log", JournalDir)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("the default journal directory exists beside one of its own: %v", err)
		}
	}
	for id, seq := range acks {
		rec, err := l.Event(id)
		if err != nil {
			t.Fatalf("acknowledged %s is missing: %v", id, err)
		}
		if rec.Leaf.Sequence != seq {
			t.Fatalf("%s has sequence %d, was acknowledged with %d", id, rec.Leaf.Sequence, seq)
		}
		if rec.BodiesLost || rec.BodiesPruned || len(rec.RequestBody) == 0 {
			t.Fatalf("acknowledged %s lost its bodies", id)
		}
	}
	perTenant := checkContiguous(t, l, len(acks))
	if _, err := l.SignHeads(day1); err != nil {
		t.Fatal(err)
	}
	for tenant, before := range lastHeads {
		after, err := l.Head(tenant, "2026-03-01")
		if err != nil {
			t.Fatal(err)
		}
		if err := head.Verify(after, pki.ca); err != nil {
			t.Fatalf("%s: head after restart: %v", tenant, err)
		}
		if after.EventCount != perTenant[tenant] {
			t.Fatalf("%s: head after restart covers %d events, store holds %d", tenant, after.EventCount, perTenant[tenant])
		}
		p, err := l.ConsistencyProof(tenant, "2026-03-01", before.EventCount, after.EventCount)
		if err != nil {
			t.Fatal(err)
		}
		if err := head.VerifyConsistency(before, after, p); err != nil {
			t.Fatalf("%s: head after restart does not extend the last head before the kill: %v", tenant, err)
		}
	}
	next, err := l.Append(context.Background(), event(1, "acme"))
	if err != nil {
		t.Fatal(err)
	}
	total := uint64(0)
	for _, n := range perTenant {
		total += n
	}
	if next.Sequence != total+1 {
		t.Fatalf("first sequence after restart %d, want %d", next.Sequence, total+1)
	}
}

// runCrashChild runs the child until it acknowledged minAcks events and
// printed minHeads heads, SIGKILLs it, and returns what it acknowledged and
// the last head it printed per tenant.
func runCrashChild(t *testing.T, dir string, syncs int, journal string, minAcks, minHeads int) (map[string]uint64, map[string]head.Head) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashSyncsEnv+"="+strconv.Itoa(syncs), crashJournalEnv+"="+journal)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() }) // never leave the child running
	acks := map[string]uint64{}
	lastHeads := map[string]head.Head{}
	heads, killed := 0, false
	r := bufio.NewReader(stdout)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			break // EOF after the kill; a partial last line is not an ack
		}
		kind, rest, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		switch kind {
		case "ack":
			id, seq, _ := strings.Cut(rest, " ")
			n, err := strconv.ParseUint(seq, 10, 64)
			if err != nil {
				t.Fatalf("child printed %q", line)
			}
			acks[id] = n
		case "head":
			var h head.Head
			if err := json.Unmarshal([]byte(rest), &h); err != nil {
				t.Fatalf("child printed %q: %v", line, err)
			}
			lastHeads[h.TenantID] = h
			heads++
		}
		if !killed && len(acks) >= minAcks && heads >= minHeads {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("child exited before the kill (%v): %s", err, stderr.String())
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v, %s", err, stderr.String())
	}
	t.Logf("child acknowledged %d events and signed %d heads before SIGKILL", len(acks), heads)
	return acks, lastHeads
}

// checkContiguous checks that the day's sequences run 1..N with no gap,
// each indexed once, N at least the acknowledged count, and returns the
// events per tenant.
func checkContiguous(t *testing.T, l *Log, acked int) map[string]uint64 {
	t.Helper()
	perTenant := map[string]uint64{}
	err := l.db.View(func(tx *bolt.Tx) error {
		want := uint64(1)
		c := tx.Bucket(bucketEvents).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			day, seq, err := splitEventKey(k)
			if err != nil {
				return err
			}
			if day != "2026-03-01" || seq != want {
				return fmt.Errorf("event %s/%d where %d was due", day, seq, want)
			}
			want++
		}
		last, _ := parseDayState(tx.Bucket(bucketSeq).Get([]byte("2026-03-01")))
		if last != want-1 || last < uint64(acked) {
			return fmt.Errorf("last sequence %d, %d events stored, %d acknowledged", last, want-1, acked)
		}
		if n := tx.Bucket(bucketRequests).Stats().KeyN; n != int(last) {
			return fmt.Errorf("%d request ids indexed for %d events", n, last)
		}
		for _, tenant := range crashTenants {
			tr, err := loadTree(tx, "2026-03-01", tenant)
			if err != nil {
				return err
			}
			perTenant[tenant] = tr.size
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return perTenant
}
