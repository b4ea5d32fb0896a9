package log

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-dev/tollgate/internal/dirlock"
	"github.com/tollgate-dev/tollgate/internal/durable"
)

// The journal may live in a directory of its own (Options.JournalDir), on
// a faster disk than audit.db. The two are then separate things an
// operator can mismatch, and a mismatch is silent harm: a log opened on
// another log's journal would replay that log's events into its own
// audit.db, and a log opened on an empty directory after journaling
// elsewhere would drop its unapplied acknowledged events and reuse their
// sequence numbers. So a journal directory is bound to one audit.db:
//
//   - audit.db holds a random log id (meta/log_id) and, once bound, the
//     journal directory it was last opened with (meta/journal_dir);
//   - the journal directory holds the same id in JournalIDFile.
//
// Open accepts a journal directory whose id file matches audit.db's id.
// A directory without one is bound (the file written) only when that
// cannot hide another log's journal or this log's own:
//
//   - it is the log's default directory, <dir>/journal: a log from before
//     id files journaled only there (the upgrade), and a log bound
//     elsewhere has meta/journal_dir, which refuses it first;
//   - or audit.db never journaled (no meta/current_day, set before a day's
//     first journal file) and the directory holds no journal files.
//
// Everything else is refused with ErrWrongJournal. audit.db's id is stored
// before the file is written and meta/journal_dir only after it is
// durable, and no event is journaled before Open returns: a crash in
// between leaves a log that was never bound, decided afresh at the next
// Open. JournalLockFile, locked while the log is open, keeps a second log
// off the directory (bbolt's own lock covers audit.db only).

// Files in the journal directory besides the journals.
const (
	// JournalIDFile holds the id of the log the journal belongs to.
	JournalIDFile = "journal.id"
	// JournalLockFile is flocked while a log has the directory open.
	JournalLockFile = "journal.lock"
)

// journalIDFormat is the format field of JournalIDFile.
const journalIDFormat = "tollgate-audit-journal-id/v1"

// journalID is the content of JournalIDFile (JSON). Only the format and
// the log id are checked; the rest makes errors and inspection readable.
type journalID struct {
	Format      string `json:"format"`
	LogID       string `json:"log_id"`
	ApplianceID string `json:"appliance_id"`
	// AuditDB is where audit.db was when the directory was bound.
	AuditDB string `json:"audit_db"`
}

// openJournalDir locks the journal directory and checks (or makes) its
// binding to audit.db. It runs in Open after init and before recover.
func (l *Log) openJournalDir() error {
	lock, err := dirlock.AcquireNamed(l.journalDir, JournalLockFile)
	if le := (*dirlock.LockedError)(nil); errors.As(err, &le) {
		holder := ""
		if le.PID > 0 {
			holder = fmt.Sprintf(" (pid %d)", le.PID)
		}
		return fmt.Errorf("%w: %s is locked by another open audit log%s", ErrJournalInUse, l.journalDir, holder)
	}
	if err != nil {
		return fmt.Errorf("audit log: journal directory: %w", err)
	}
	if err := l.bindJournal(); err != nil {
		_ = lock.Close()
		return err
	}
	l.journalLock = lock
	return nil
}

// bindJournal checks that the journal directory is this log's, binding it
// first when that is safe (see above).
func (l *Log) bindJournal() error {
	file, err := readJournalID(l.journalDir)
	if err != nil {
		return err
	}
	var logID, boundDir string
	fresh := false
	if err := l.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		logID, boundDir = string(meta.Get(metaLogID)), string(meta.Get(metaJournalDir))
		fresh = meta.Get(metaCurrentDay) == nil
		return nil
	}); err != nil {
		return fmt.Errorf("audit log: read the journal binding: %w", err)
	}
	dbPath := absPath(filepath.Join(l.dir, FileName))
	switch {
	case file != nil && file.LogID == logID:
		// This log's journal.
	case file != nil:
		this := "log id " + logID
		if logID == "" {
			this = "no log id yet"
		}
		return fmt.Errorf("%w: %s belongs to the audit log %s (log id %s), not to %s (%s)",
			ErrWrongJournal, l.journalDir, file.AuditDB, file.LogID, dbPath, this)
	case boundDir != "" && (boundDir == absPath(l.journalDir) || sameDir(boundDir, l.journalDir)):
		return fmt.Errorf("%w: %s, the journal directory of %s (log id %s), has lost its %s: restore the file, or open the log with the directory it was moved to",
			ErrWrongJournal, l.journalDir, dbPath, logID, JournalIDFile)
	case boundDir != "":
		return fmt.Errorf("%w: %s keeps its journal in %s (log id %s), and %s has no %s: open the log with its journal directory (a journal directory is moved whole, %s included)",
			ErrWrongJournal, dbPath, boundDir, logID, l.journalDir, JournalIDFile, JournalIDFile)
	default:
		if err := l.mayAdopt(dbPath, fresh); err != nil {
			return err
		}
		if logID == "" {
			logID = rand.Text()
			if err := l.db.Update(func(tx *bolt.Tx) error {
				return tx.Bucket(bucketMeta).Put(metaLogID, []byte(logID))
			}); err != nil {
				return fmt.Errorf("audit log: store the log id: %w", err)
			}
		}
		id := journalID{Format: journalIDFormat, LogID: logID, ApplianceID: l.opts.ApplianceID, AuditDB: dbPath}
		if err := writeJournalID(l.journalDir, id); err != nil {
			return err
		}
		l.opts.Logger.Info("audit log: journal directory bound to the log", "journal", l.journalDir, "log_id", logID)
	}
	return l.recordJournalDir(boundDir)
}

// mayAdopt returns why a journal directory without an id file may not be
// bound to this log, which has none bound, or nil when it may (see above).
func (l *Log) mayAdopt(dbPath string, fresh bool) error {
	defaultDir := filepath.Join(l.dir, JournalDir)
	if sameDir(l.journalDir, defaultDir) {
		return nil
	}
	days, err := journalDays(l.journalDir)
	if err != nil {
		return err
	}
	if len(days) > 0 {
		return fmt.Errorf("%w: %s holds journal files but no %s, so they may be another log's: %s will not adopt them (a journal from before %s files is adopted only in its default place, %s)",
			ErrWrongJournal, l.journalDir, JournalIDFile, dbPath, JournalIDFile, defaultDir)
	}
	if !fresh {
		return fmt.Errorf("%w: %s has journaled events in its default journal directory %s, not yet bound: open the log there once (which binds it), then move that directory whole to %s",
			ErrWrongJournal, dbPath, defaultDir, l.journalDir)
	}
	return nil
}

// recordJournalDir stores the journal directory's path in audit.db, which
// marks the log bound; was is the path stored before. A journal
// directory that moved (moved whole, its id file with it) is accepted;
// the log says so, since a copy left behind would be accepted too.
func (l *Log) recordJournalDir(was string) error {
	now := absPath(l.journalDir)
	if now == was || sameDir(was, l.journalDir) { // the same, spelled otherwise
		return nil
	}
	if was != "" {
		l.opts.Logger.Warn("audit log: the journal directory is not where the log last opened it; only the directory now given is used",
			"was", was, "journal", now)
	}
	if err := l.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(metaJournalDir, []byte(now))
	}); err != nil {
		return fmt.Errorf("audit log: record the journal directory: %w", err)
	}
	return nil
}

// readJournalID reads the id file of dir; nil when there is none.
func readJournalID(dir string) (*journalID, error) {
	path := filepath.Join(dir, JournalIDFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit log: journal id: %w", err)
	}
	var id journalID
	if err := json.Unmarshal(b, &id); err != nil || id.Format != journalIDFormat || id.LogID == "" {
		return nil, fmt.Errorf("audit log: %s is not a journal id file of format %s", path, journalIDFormat)
	}
	return &id, nil
}

// writeJournalID writes dir's id file whole or not at all: a temporary
// file, synced, renamed into place, and the directory synced.
func writeJournalID(dir string, id journalID) error {
	data, err := json.Marshal(id)
	if err != nil {
		return fmt.Errorf("audit log: journal id: %w", err)
	}
	path := filepath.Join(dir, JournalIDFile)
	tmp := path + ".tmp"
	if err := durable.Replace(tmp, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("audit log: write journal id: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("audit log: write journal id: %w", err)
	}
	return syncDir(dir)
}

// sameDir reports whether a and b are one existing directory, however
// spelled (relative, through a symbolic link).
func sameDir(a, b string) bool {
	ai, err := os.Stat(a)
	if err != nil {
		return false
	}
	bi, err := os.Stat(b)
	return err == nil && os.SameFile(ai, bi)
}

// absPath is path made absolute for messages and records, or path as
// given if that fails.
func absPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}
