package log

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/clocktest"
)

// journalFixture is a closed log whose audit.db has applied the day's
// first frame and whose journal holds three more, acknowledged and not
// yet applied (as a crash leaves them), for Open to recover.
type journalFixture struct {
	files map[string][]byte // the log's directory, by relative path
	opts  Options
	// journal is the day's journal file (relative path); valid its
	// frames, without the zero-filled space past them.
	journal string
	valid   []byte
	// frames are the frames of valid: where each ends, and its event.
	frames []fixtureFrame
	// applied is where the frames audit.db has applied end.
	applied uint64
}

type fixtureFrame struct {
	end uint64
	ev  Event
}

func newJournalFixture(tb testing.TB) *journalFixture {
	dir := tb.TempDir()
	clock := clocktest.New(day1)
	opts := Options{Now: clock.Now, Signer: newTestPKI(tb, "app_test").app,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	events := []Event{event(0, "acme"), event(1, "acme"), event(2, "globex"), event(3, "acme")}
	open := func() *Log {
		l, err := Open(dir, opts)
		if err != nil {
			tb.Fatal(err)
		}
		return l
	}
	appendEvent := func(l *Log, ev Event) {
		if _, err := l.Append(tb.Context(), ev); err != nil {
			tb.Fatal(err)
		}
	}
	l := open()
	appendEvent(l, events[0])
	if err := l.Close(); err != nil {
		tb.Fatal(err)
	}
	db0, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		tb.Fatal(err)
	}
	l = open()
	for _, ev := range events[1:] {
		appendEvent(l, ev)
	}
	if err := l.Close(); err != nil {
		tb.Fatal(err)
	}
	fx := &journalFixture{files: map[string][]byte{}, opts: opts, journal: filepath.Join(JournalDir, "2026-03-01"+journalSuffix)}
	if err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == JournalLockFile {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		b, err := os.ReadFile(path)
		fx.files[rel] = b
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	fx.files[FileName] = db0
	f, err := os.Open(filepath.Join(dir, fx.journal))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var buf []byte
	for off := uint64(0); ; {
		var e entry
		e, off, buf, err = readRecord(f, off, buf)
		if err != nil {
			break
		}
		fx.frames = append(fx.frames, fixtureFrame{end: off, ev: events[e.seq-1]})
	}
	if len(fx.frames) != len(events) {
		tb.Fatalf("the fixture's journal holds %d frames, want %d", len(fx.frames), len(events))
	}
	fx.applied = fx.frames[0].end
	fx.valid = fx.files[fx.journal][:fx.frames[len(fx.frames)-1].end]
	return fx
}

// write lays the fixture out in dir, the day's journal replaced by
// journal and extra files added (relative path to content).
func (fx *journalFixture) write(tb testing.TB, dir string, journal []byte, extra map[string][]byte) {
	if err := os.RemoveAll(dir); err != nil {
		tb.Fatal(err)
	}
	for rel, b := range fx.files {
		if rel == fx.journal {
			b = journal
		}
		writeFixtureFile(tb, filepath.Join(dir, rel), b)
	}
	for rel, b := range extra {
		writeFixtureFile(tb, filepath.Join(dir, rel), b)
	}
}

func writeFixtureFile(tb testing.TB, path string, b []byte) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
}

// FuzzJournalRecovery: Open recovers a journal holding arbitrary bytes:
// after the day's valid frames, cut anywhere past what audit.db applied
// (a torn write, damage, garbage), or as the whole journal of a day
// audit.db has never seen. It never panics; it fails with an error of
// the audit log, or opens a log in which every frame written whole
// before the first changed byte is readable, sequences run without a
// gap, and which opens again without replaying anything more.
func FuzzJournalRecovery(f *testing.F) {
	fx := newJournalFixture(f)
	tail := uint64(len(fx.valid)) - fx.applied
	f.Add([]byte{}, uint32(tail), false)                                             // the journal as it was
	f.Add([]byte{}, uint32(tail-7), false)                                           // its last frame torn
	f.Add(make([]byte, 4096), uint32(tail), false)                                   // zero-filled space
	f.Add(append(make([]byte, 64), 1), uint32(tail), false)                          // data past the zeros
	f.Add(fx.valid[fx.frames[1].end:], uint32(0), false)                             // a frame missing
	f.Add(fx.valid[fx.frames[2].end:], uint32(fx.frames[1].end-fx.applied+3), false) // acknowledged frames damaged
	f.Add(fx.valid[:fx.frames[0].end], uint32(tail), false)                          // a frame repeated
	f.Add(fx.valid, uint32(0), true)                                                 // another day's journal of this log's frames
	f.Add([]byte("not a journal"), uint32(0), true)
	dir := filepath.Join(f.TempDir(), "log")
	f.Fuzz(func(t *testing.T, data []byte, cut uint32, otherDay bool) {
		journal := fx.valid
		extra := map[string][]byte{}
		if otherDay {
			extra[filepath.Join(JournalDir, "2026-02-28"+journalSuffix)] = data
		} else {
			n := fx.applied + uint64(cut)%(tail+1)
			journal = append(bytes.Clone(fx.valid[:n]), data...)
		}
		fx.write(t, dir, journal, extra)
		l, err := Open(dir, fx.opts)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "audit log") {
				t.Fatalf("Open failed with an error not the audit log's: %v", err)
			}
			return
		}
		defer func() { _ = l.Close() }()
		same := 0
		for same < len(journal) && same < len(fx.valid) && journal[same] == fx.valid[same] {
			same++
		}
		var seqs []uint64
		for _, fr := range fx.frames {
			if fr.end > uint64(same) {
				break
			}
			rec, err := l.Event(fr.ev.RequestID)
			if err != nil || rec.BodiesLost || !bytes.Equal(rec.RequestBody, fr.ev.RequestBody) {
				t.Fatalf("a frame written whole before the first changed byte (%d) is lost: %s: %+v, %v", same, fr.ev.RequestID, rec, err)
			}
			seqs = append(seqs, rec.Leaf.Sequence)
		}
		for i, s := range seqs {
			if s != uint64(i+1) {
				t.Fatalf("sequences %v after recovery", seqs)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l, err = Open(dir, fx.opts)
		if err != nil {
			t.Fatalf("a recovered log does not open again: %v", err)
		}
		if n := l.Stats().Replayed; n != 0 {
			t.Fatalf("a recovered log replayed %d more frames when opened again", n)
		}
	})
}

// Recovery errors the fixture's damage is known to give, named.
func TestJournalFixtureDamageNamed(t *testing.T) {
	fx := newJournalFixture(t)
	// The second unapplied frame damaged, the third intact: its mark
	// proves the damaged bytes were acknowledged.
	journal := bytes.Clone(fx.valid)
	journal[fx.frames[1].end+3] ^= 0xff
	dir := filepath.Join(t.TempDir(), "log")
	fx.write(t, dir, journal, nil)
	_, err := Open(dir, fx.opts)
	if !errors.Is(err, ErrJournalDamaged) {
		t.Fatalf("Open of a journal damaged inside acknowledged frames: %v; want ErrJournalDamaged", err)
	}
}
