package log

import "errors"

// Errors callers tell apart with errors.Is.
var (
	// ErrClosed: the log is closed.
	ErrClosed = errors.New("audit log: closed")
	// ErrFailed wraps the error of a failed commit. After one, the log
	// refuses every append until it is reopened: what reached the disk is
	// then known only from the file, so the process should restart.
	ErrFailed = errors.New("audit log: a commit failed; reopen the log")
	// ErrDiskFull: the disk of the journal or of audit.db is full (ENOSPC
	// or EDQUOT). Appends are refused at once, nothing acknowledged is
	// lost, and the log takes appends again by itself once a probe write
	// finds space (diskfull.go): no reopen is needed.
	ErrDiskFull = errors.New("audit log: the audit log's disk is full")
	// ErrInvalid: a malformed argument (identifier, day, event field, size).
	ErrInvalid = errors.New("audit log: invalid argument")
	// ErrDuplicate: an event with this request id is already recorded.
	ErrDuplicate = errors.New("audit log: duplicate request id")
	// ErrNotFound: no such event, tree or head.
	ErrNotFound = errors.New("audit log: not found")
	// ErrNotCovered: the event is not yet covered by a signed head; heads
	// are signed every head interval.
	ErrNotCovered = errors.New("audit log: event not yet covered by a signed head")
	// ErrDayOpen: the day has not ended yet.
	ErrDayOpen = errors.New("audit log: day not closed")
	// ErrJournalDamaged: Open found bytes of a journal that cannot be
	// read where a later frame proves they had been acknowledged (see
	// frameMark): not a torn write, so recovery will not cut them.
	ErrJournalDamaged = errors.New("audit log: journal damaged inside acknowledged events")
	// ErrNoSigner: the log was opened without an appliance certificate.
	ErrNoSigner = errors.New("audit log: no signer configured")
	// ErrWrongJournal: Open was given a journal directory that belongs to
	// another log, or that this log's journal is not in (journaldir.go).
	ErrWrongJournal = errors.New("audit log: wrong journal directory")
	// ErrJournalInUse: another open log, in this process or another, has
	// the journal directory.
	ErrJournalInUse = errors.New("audit log: journal directory in use")
)
