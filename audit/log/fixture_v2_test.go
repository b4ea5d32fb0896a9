package log

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// fixtureV2 is a log written by the code of audit.db format v2 with
// version 2 journal frames, before bodies were compressed: its records and
// frames hold the bodies as they were sent. TestWriteFixtureV2, in the
// commit that added the directory (git log testdata/format-v2), wrote it
// with that code; it is not written again, since this code writes format
// v3. Its recorded paths are /var/lib/tollgate/audit's, and audit.db is
// compacted.
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
	evs = appendAfterFixture(t, l, evs, more)
	checkFixtureEvents(t, l, evs)
	// The old records are read as they are; the log is marked v3; the
	// stream appended since is stored compressed.
	err = l.db.View(func(tx *bolt.Tx) error {
		if got := string(tx.Bucket(bucketMeta).Get(metaFormat)); got != formatVersion {
			t.Errorf("meta/format %q after open, want %q", got, formatVersion)
		}
		for i := range evs {
			v := tx.Bucket(bucketEvents).Get(eventKey("2026-03-01", uint64(i+1)))
			if old := v[eventHeaderLenV2] == '{'; old != (i < fixtureV2Applied) {
				t.Errorf("event %d: record of format v2 %v, want %v", i+1, old, i < fixtureV2Applied)
			}
			r, err := decodeEventRecord(v)
			if err != nil {
				return err
			}
			if want := map[bool]byte{true: codecS2, false: codecNone}[i == 6]; r.codec != want {
				t.Errorf("event %d stored with codec %d, want %d", i+1, r.codec, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	checkFixtureEvents(t, l, evs)
}
