package log

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/audit/leaf"
)

// fixtureV2 is a log written by the code of audit.db format v2 with
// version 2 journal frames, before bodies were compressed: its records and
// frames hold the bodies as they were sent.
const fixtureV2 = "testdata/format-v2"

// fixtureV2Applied events of fixtureV2Events are in its audit.db; the
// rest are journal frames past the applied end, as a crash leaves them.
const fixtureV2Applied = 4

// fixtureV2Events are the events of fixtureV2, in sequence order: bodies
// of several kinds (a typical request, none, a long stream, binary).
func fixtureV2Events() []Event {
	evs := []Event{event(1, "acme"), event(2, "globex"), streamEvent(3, 120), event(4, "acme"), streamEvent(5, 40), event(6, "globex")}
	evs[1].RequestBody, evs[1].ResponseBody = nil, nil
	evs[3].ResponseBody = bytes.Repeat([]byte{0, 0xff, 0x1f, 0x8b}, 64)
	for i := range evs {
		evs[i].Time = day1.Add(time.Duration(i) * time.Second)
		evs[i].TenantID, evs[i].KeyID = []string{"acme", "globex"}[i%2], "key_fixture"
	}
	return evs
}

// TestWriteFixtureV2 wrote fixtureV2 with the code of format v2; it runs
// only when asked (TOLLGATE_WRITE_FIXTURE=v2), and only that code writes
// that format.
func TestWriteFixtureV2(t *testing.T) {
	if os.Getenv("TOLLGATE_WRITE_FIXTURE") != "v2" {
		t.Skip("writes testdata; set TOLLGATE_WRITE_FIXTURE=v2")
	}
	dir := t.TempDir()
	opts := Options{ApplianceID: "app_fixture", Now: func() time.Time { return day1 }}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	evs := fixtureV2Events()
	for _, ev := range evs[:fixtureV2Applied] {
		if _, err := l.Append(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The frames of the other events, journaled and not applied.
	path := filepath.Join(dir, JournalDir, "2026-03-01"+journalSuffix)
	end := fileSize(t, path)
	mark := frameMark{nonce: l.nonce, durable: end}
	var buf []byte
	sizes := map[string]uint64{}
	for i, ev := range evs {
		if i < fixtureV2Applied {
			sizes[ev.TenantID]++
			continue
		}
		p, err := l.prepare(ev)
		if err != nil {
			t.Fatal(err)
		}
		seq := uint64(i + 1)
		en := entry{tenant: p.tenant, requestID: p.requestID, seq: seq, leafIndex: sizes[ev.TenantID],
			leaf: p.tpl.Bytes(seq), reqLen: uint64(p.reqLen), respLen: uint64(len(p.bodies) - p.reqLen)}
		sizes[ev.TenantID]++
		buf = appendRecord(buf, end+uint64(len(buf)), mark, &en, p.bodies)
	}
	appendFile(t, path, buf)

	// The log as it would be in an appliance's data directory: the paths
	// it recorded are those of /var/lib/tollgate, not of this test's.
	const home = "/var/lib/tollgate/audit"
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(metaJournalDir, []byte(home+"/"+JournalDir))
	}); err != nil {
		t.Fatal(err)
	}
	id, err := readJournalID(filepath.Join(dir, JournalDir))
	if err != nil {
		t.Fatal(err)
	}
	id.AuditDB = home + "/" + FileName
	if err := os.RemoveAll(fixtureV2); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(fixtureV2, JournalDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeJournalID(filepath.Join(fixtureV2, JournalDir), *id); err != nil {
		t.Fatal(err)
	}
	journal, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fixtureV2, JournalDir, filepath.Base(path)), journal, 0o644); err != nil {
		t.Fatal(err)
	}
	// Compacted: the file bbolt grew holds megabytes of free pages.
	small, err := bolt.Open(filepath.Join(fixtureV2, FileName), 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bolt.Compact(small, db, 0); err != nil {
		t.Fatal(err)
	}
	for _, d := range []*bolt.DB{small, db} {
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Println("wrote", fixtureV2)
}

// copyFixture copies the log of a fixture directory to a new directory,
// and returns it.
func copyFixture(t *testing.T, from string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "audit")
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o700)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestReadsFormatV2: a log written before bodies were compressed opens,
// replays its journaled frames, and returns every event with its bodies
// byte for byte; events appended since join the same day's journal and
// read back beside them, before and after a reopen.
func TestReadsFormatV2(t *testing.T) {
	dir := copyFixture(t, fixtureV2)
	opts := Options{ApplianceID: "app_fixture", Now: func() time.Time { return day1.Add(time.Hour) }}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	evs := fixtureV2Events()
	if got, want := l.Stats().Replayed, uint64(len(evs)-fixtureV2Applied); got != want {
		t.Fatalf("replayed %d frames of the old format, want %d", got, want)
	}
	more := []Event{streamEvent(7, 200), event(8, "acme")}
	for i, ev := range more {
		r, err := l.Append(t.Context(), ev)
		if err != nil {
			t.Fatal(err)
		}
		if want := uint64(len(evs) + i + 1); r.Sequence != want {
			t.Fatalf("%s: sequence %d, want %d", ev.RequestID, r.Sequence, want)
		}
	}
	evs = append(evs, more...)
	check := func(l *Log) {
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
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	check(l)
}
