package log

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/internal/dirlock"
	"github.com/tollgate-dev/tollgate/internal/lockedbuf"
)

// TestOwnJournalDirectory: with Options.JournalDir the journal, its id
// file and its lock are there and nowhere else; events and their bodies
// read back after a reopen with the same options, and sequences go on.
func TestOwnJournalDirectory(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "fast", "journal")
	e := newEnv(t, Options{JournalDir: journal})
	evs := []Event{event(0, "acme"), event(1, "globex"), event(2, "acme")}
	for _, ev := range evs {
		e.mustAppend(t, ev)
	}
	e.reopen(t, Options{})
	for _, ev := range evs {
		rec, err := e.log.Event(ev.RequestID)
		if err != nil || rec.BodiesLost || !bytes.Equal(rec.RequestBody, ev.RequestBody) || !bytes.Equal(rec.ResponseBody, ev.ResponseBody) {
			t.Fatalf("%s after reopen: %+v, %v", ev.RequestID, rec, err)
		}
	}
	if r := e.mustAppend(t, event(3, "globex")); r.Sequence != 4 || r.LeafIndex != 1 {
		t.Fatalf("append after reopen: %+v, want sequence 4, leaf 1", r)
	}

	entries, err := os.ReadDir(journal)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, en := range entries {
		names = append(names, en.Name())
	}
	if want := []string{"2026-03-01.journal", JournalIDFile, JournalLockFile, StartsFile}; !slices.Equal(names, want) {
		t.Fatalf("journal directory holds %v, want %v", names, want)
	}
	if _, err := os.Stat(filepath.Join(e.dir, JournalDir)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the default journal directory exists beside one of its own: %v", err)
	}
	id, err := readJournalID(journal)
	if err != nil {
		t.Fatal(err)
	}
	logID, boundDir := logMeta(t, e.log)
	if id == nil || id.LogID != logID || id.ApplianceID != "app_test" || id.AuditDB != filepath.Join(e.dir, FileName) || boundDir != journal {
		t.Fatalf("id file %+v; audit.db has log id %q, journal directory %q", id, logID, boundDir)
	}
}

// logMeta returns the log id and the journal directory an open log's
// audit.db records.
func logMeta(t *testing.T, l *Log) (logID, journalDir string) {
	t.Helper()
	if err := l.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		logID, journalDir = string(meta.Get(metaLogID)), string(meta.Get(metaJournalDir))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return logID, journalDir
}

// editMeta changes the meta bucket of the closed log in dir: a nil value
// deletes the key.
func editMeta(t *testing.T, dir string, kv map[string][]byte) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		for k, v := range kv {
			var err error
			if v == nil {
				err = meta.Delete([]byte(k))
			} else {
				err = meta.Put([]byte(k), v)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if closeErr := db.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// unbind makes the closed log in dir, journal in its default directory,
// as it was before journal id files: no id file, no lock file, no log id.
func unbind(t *testing.T, dir string) {
	t.Helper()
	for _, name := range []string{JournalIDFile, JournalLockFile} {
		if err := os.Remove(filepath.Join(dir, JournalDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	editMeta(t, dir, map[string][]byte{string(metaLogID): nil, string(metaJournalDir): nil})
}

func readIDFile(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, JournalIDFile))
	return string(b)
}

// TestJournalDirSpelledOtherwise: the bound journal directory named through
// a symbolic link (or a relative path) is the same directory: the log
// opens without taking it for a move, and keeps the path it recorded.
func TestJournalDirSpelledOtherwise(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "journal")
	var logs lockedbuf.Buffer
	e := newEnv(t, Options{JournalDir: journal})
	e.mustAppend(t, event(0, "acme"))
	_, bound := logMeta(t, e.log)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(journal, link); err != nil {
		t.Fatal(err)
	}
	e.reopen(t, Options{JournalDir: link, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if _, now := logMeta(t, e.log); now != bound {
		t.Fatalf("journal directory recorded as %s after opening it through a link, want %s kept", now, bound)
	}
	if strings.Contains(logs.String(), "not where the log last opened it") {
		t.Fatalf("opening the bound directory through a link was logged as a move:\n%s", logs.String())
	}
	if r := e.mustAppend(t, event(1, "acme")); r.Sequence != 2 {
		t.Fatalf("append through the link: %+v", r)
	}
}

// TestJournalDirRefused: a journal directory that belongs to another
// log, or one this log's journal is not in, is refused with an error
// naming both paths, and the refusal changes neither log.
func TestJournalDirRefused(t *testing.T) {
	// scene is log a, journal in a directory of its own, with events.
	type scene struct{ base, a, journalA string }
	pki := newTestPKI(t, "app_test")
	open := func(dir, journal string) (*Log, error) {
		return Open(dir, Options{Signer: pki.app, Now: func() time.Time { return day1 }, JournalDir: journal})
	}
	mustOpen := func(t *testing.T, dir, journal string, evs ...Event) *Log {
		t.Helper()
		l, err := open(dir, journal)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if _, err := l.Append(t.Context(), ev); err != nil {
				t.Fatal(err)
			}
		}
		return l
	}
	mustClose := func(t *testing.T, l *Log) {
		t.Helper()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name string
		// prepare changes the scene as the case needs and returns the
		// log directory and journal directory to open.
		prepare func(t *testing.T, s scene) (dir, journal string)
		errIs   error
		// want is what the error says; {base}, {a} and {journalA} stand
		// for the scene's paths.
		want []string
		// damagesA: the case breaks log a's journal directory itself.
		damagesA bool
	}{
		{"another, empty directory", func(t *testing.T, s scene) (string, string) {
			return s.a, filepath.Join(s.base, "new")
		}, ErrWrongJournal, []string{"{a}/audit.db keeps its journal in {journalA} (log id ", "{base}/new has no journal.id"}, false},
		{"the default directory", func(t *testing.T, s scene) (string, string) {
			return s.a, ""
		}, ErrWrongJournal, []string{"{a}/audit.db keeps its journal in {journalA}", "{a}/journal has no journal.id"}, false},
		{"another log's directory, from a new log", func(t *testing.T, s scene) (string, string) {
			return filepath.Join(s.base, "b"), s.journalA
		}, ErrWrongJournal, []string{"{journalA} belongs to the audit log {a}/audit.db (log id ", "not to {base}/b/audit.db (no log id yet)"}, false},
		{"another log's directory, from a log bound elsewhere", func(t *testing.T, s scene) (string, string) {
			c := filepath.Join(s.base, "c")
			mustClose(t, mustOpen(t, c, filepath.Join(s.base, "journal-c"), event(0, "acme")))
			return c, s.journalA
		}, ErrWrongJournal, []string{"{journalA} belongs to the audit log {a}/audit.db (log id ", "not to {base}/c/audit.db (log id "}, false},
		{"journal files without an id file", func(t *testing.T, s scene) (string, string) {
			loose := filepath.Join(s.base, "loose")
			if err := os.Mkdir(loose, 0o700); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(s.journalA, "2026-03-01.journal"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(loose, "2026-03-01.journal"), b, 0o600); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(s.base, "b"), loose
		}, ErrWrongJournal, []string{"{base}/loose holds journal files but no journal.id", "{base}/b/audit.db will not adopt them"}, false},
		{"a log from before id files that journaled, in a new directory", func(t *testing.T, s scene) (string, string) {
			d := filepath.Join(s.base, "d")
			mustClose(t, mustOpen(t, d, "", event(0, "acme")))
			unbind(t, d)
			return d, filepath.Join(s.base, "new")
		}, ErrWrongJournal, []string{"{base}/d/audit.db has journaled events in its default journal directory {base}/d/journal", "move that directory whole to {base}/new"}, false},
		{"its own directory, id file removed", func(t *testing.T, s scene) (string, string) {
			if err := os.Remove(filepath.Join(s.journalA, JournalIDFile)); err != nil {
				t.Fatal(err)
			}
			return s.a, s.journalA
		}, ErrWrongJournal, []string{"{journalA}, the journal directory of {a}/audit.db (log id ", "has lost its journal.id"}, true},
		{"its own directory, id file damaged", func(t *testing.T, s scene) (string, string) {
			if err := os.WriteFile(filepath.Join(s.journalA, JournalIDFile), []byte("{}\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			return s.a, s.journalA
		}, nil, []string{"{journalA}/journal.id is not a journal id file"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			s := scene{base: base, a: filepath.Join(base, "a"), journalA: filepath.Join(base, "journal-a")}
			evs := []Event{event(0, "acme"), event(1, "globex")}
			mustClose(t, mustOpen(t, s.a, s.journalA, evs...))
			dir, journal := tc.prepare(t, s)
			idDir := journal
			if idDir == "" {
				idDir = filepath.Join(dir, JournalDir)
			}
			idBefore := readIDFile(idDir)

			l, err := open(dir, journal)
			if err == nil {
				_ = l.Close()
				t.Fatalf("Open(%s, journal %q) succeeded", dir, journal)
			}
			if tc.errIs != nil && !errors.Is(err, tc.errIs) {
				t.Fatalf("error %q, want %q", err, tc.errIs)
			}
			paths := strings.NewReplacer("{base}", base, "{a}", s.a, "{journalA}", s.journalA)
			for _, w := range tc.want {
				if w = paths.Replace(w); !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if idAfter := readIDFile(idDir); idAfter != idBefore {
				t.Errorf("the refused Open changed %s from %q to %q", filepath.Join(idDir, JournalIDFile), idBefore, idAfter)
			}
			if tc.damagesA {
				return
			}
			// Log a still opens with its journal, all there.
			la := mustOpen(t, s.a, s.journalA)
			defer mustClose(t, la)
			for _, ev := range evs {
				if rec, err := la.Event(ev.RequestID); err != nil || !bytes.Equal(rec.RequestBody, ev.RequestBody) {
					t.Fatalf("log a after the refusal: %s: %+v, %v", ev.RequestID, rec, err)
				}
			}
		})
	}
}

// TestJournalDirInUse: a journal directory another open log has is
// refused at once, naming the holder; the data directory's own lock in
// the same directory is no obstacle.
func TestJournalDirInUse(t *testing.T) {
	pki := newTestPKI(t, "app_test")
	open := func(dir, journal string) (*Log, error) {
		return Open(dir, Options{Signer: pki.app, Now: func() time.Time { return day1 }, JournalDir: journal})
	}
	tests := []struct {
		name string
		hold func(t *testing.T, base, journal string) io.Closer
		// errIs is Open's error while hold's lock is held (nil: none),
		// afterIs once it is released.
		errIs, afterIs error
	}{
		{"another open log", func(t *testing.T, base, journal string) io.Closer {
			l, err := open(filepath.Join(base, "other"), journal)
			if err != nil {
				t.Fatal(err)
			}
			return l
		}, ErrJournalInUse, ErrWrongJournal},
		{"the data directory's lock", func(t *testing.T, base, journal string) io.Closer {
			if err := os.MkdirAll(journal, 0o700); err != nil {
				t.Fatal(err)
			}
			l, err := dirlock.Acquire(journal)
			if err != nil {
				t.Fatal(err)
			}
			return l
		}, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			journal := filepath.Join(base, "journal")
			holder := tc.hold(t, base, journal)
			try := func(want error) {
				t.Helper()
				l, err := open(filepath.Join(base, "log"), journal)
				if err == nil {
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
				}
				if want == nil && err != nil || !errors.Is(err, want) {
					t.Fatalf("Open: %v, want %v", err, want)
				}
				if errors.Is(err, ErrJournalInUse) {
					if w := fmt.Sprintf("%s is locked by another open audit log (pid %d)", journal, os.Getpid()); !strings.Contains(err.Error(), w) {
						t.Fatalf("error %q does not say %q", err, w)
					}
				}
			}
			try(tc.errIs)
			if err := holder.Close(); err != nil {
				t.Fatal(err)
			}
			try(tc.afterIs)
		})
	}
}

// TestJournalDirUpgrade: a log from before journal id files (journal in
// its default directory, no id file, no log id in audit.db), with events
// journaled past what audit.db applied, is bound where it is and replays
// them; elsewhere it is refused, and still opens in its place afterwards.
// The crashes a binding can meet in between are upgrades too.
func TestJournalDirUpgrade(t *testing.T) {
	tests := []struct {
		name string
		// prepare changes the unbound log and returns the JournalDir to
		// open it with.
		prepare func(t *testing.T, e *env) string
		errIs   error
	}{
		{"default directory", func(t *testing.T, e *env) string { return "" }, nil},
		{"default directory spelled out", func(t *testing.T, e *env) string { return e.journal }, nil},
		{"default directory through a symbolic link", func(t *testing.T, e *env) string {
			link := filepath.Join(t.TempDir(), "link")
			if err := os.Symlink(e.journal, link); err != nil {
				t.Fatal(err)
			}
			return link
		}, nil},
		{"log id stored, id file not yet written (a crash while binding)", func(t *testing.T, e *env) string {
			editMeta(t, e.dir, map[string][]byte{string(metaLogID): []byte("LOGIDBEFORECRASH")})
			return ""
		}, nil},
		{"id file written, directory not yet recorded (a crash while binding)", func(t *testing.T, e *env) string {
			editMeta(t, e.dir, map[string][]byte{string(metaLogID): []byte("LOGIDBEFORECRASH")})
			if err := writeJournalID(e.journal, journalID{Format: journalIDFormat, LogID: "LOGIDBEFORECRASH"}); err != nil {
				t.Fatal(err)
			}
			return ""
		}, nil},
		{"a new directory", func(t *testing.T, e *env) string { return filepath.Join(t.TempDir(), "new") }, ErrWrongJournal},
		{"a new directory after a crash while binding the default", func(t *testing.T, e *env) string {
			editMeta(t, e.dir, map[string][]byte{string(metaLogID): []byte("LOGIDBEFORECRASH")})
			return filepath.Join(t.TempDir(), "new")
		}, ErrWrongJournal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Options{})
			for i, tenant := range []string{"acme", "globex", "acme"} {
				e.mustAppend(t, event(i, tenant))
			}
			if err := e.log.Close(); err != nil {
				t.Fatal(err)
			}
			path := e.journalOf("2026-03-01")
			appendFile(t, path, e.frames(t, fileSize(t, path), 4, []Event{event(3, "acme"), event(4, "globex")}, []uint64{2, 1}))
			unbind(t, e.dir)
			e.log = nil
			journal := tc.prepare(t, e)

			l, err := Open(e.dir, Options{Signer: e.pki.app, Now: e.clock.Now, JournalDir: journal})
			if tc.errIs != nil {
				if err == nil {
					_ = l.Close()
				}
				if !errors.Is(err, tc.errIs) {
					t.Fatalf("Open with journal %q: %v, want %v", journal, err, tc.errIs)
				}
				e.reopen(t, Options{}) // in its place, as before
			} else {
				if err != nil {
					t.Fatalf("Open with journal %q: %v", journal, err)
				}
				e.log = l
				t.Cleanup(func() { _ = l.Close() })
			}
			if got := e.log.Stats().Replayed; got != 2 {
				t.Fatalf("replayed %d events, want 2", got)
			}
			for _, id := range []string{"req_acme0", "req_globex1", "req_acme3", "req_globex4"} {
				if rec, err := e.log.Event(id); err != nil || rec.BodiesLost || len(rec.RequestBody) == 0 {
					t.Fatalf("%s: %+v, %v", id, rec, err)
				}
			}
			file, err := readJournalID(e.journal)
			if err != nil {
				t.Fatal(err)
			}
			logID, boundDir := logMeta(t, e.log)
			wantDir := e.journal // as given to the Open that succeeded
			if journal != "" && tc.errIs == nil {
				wantDir = journal
			}
			if file == nil || file.LogID != logID || logID == "" || boundDir != wantDir {
				t.Fatalf("after the upgrade: id file %+v, audit.db log id %q, journal directory %q", file, logID, boundDir)
			}
			if err := e.log.Close(); err != nil {
				t.Fatal(err)
			}
			e.log = nil
			e.reopen(t, Options{}) // bound now
		})
	}
}
