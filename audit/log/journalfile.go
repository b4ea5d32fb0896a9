package log

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tollgate-dev/tollgate/audit/ids"
)

// Request and response bodies stay in the journal (see journal.go): an
// event's record in audit.db holds the offset and lengths of its bodies in
// its day's journal file, and their SHA-256 digests in the leaf check them
// on read.

// journalFile is the open journal file of the day being written. It is
// used by the committer only.
type journalFile struct {
	dir string
	day string
	f   *os.File
}

func journalPath(dir, day string) string {
	return filepath.Join(dir, day+journalSuffix)
}

// open makes f the file of day, created if missing. Its size must be end:
// recovery at Open cut any torn tail, and the committer alone writes.
func (b *journalFile) open(day string, end uint64) error {
	if b.f != nil && b.day == day {
		return nil
	}
	if err := b.close(); err != nil {
		return err
	}
	path := journalPath(b.dir, day)
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit log: journal: %w", err)
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		// The new name must survive a power loss along with the data.
		if err := syncDir(b.dir); err != nil {
			_ = f.Close()
			return err
		}
	}
	info, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("audit log: journal: %w", err)
	}
	if uint64(info.Size()) != end {
		_ = f.Close()
		return fmt.Errorf("audit log: journal %s holds %d bytes, the log expects %d", path, info.Size(), end)
	}
	b.f, b.day = f, day
	return nil
}

// write stores data at off in the open file (not yet synced).
func (b *journalFile) write(data []byte, off uint64) error {
	if _, err := b.f.WriteAt(data, int64(off)); err != nil {
		return fmt.Errorf("audit log: write journal of %s: %w", b.day, err)
	}
	return nil
}

// sync makes what was written durable.
func (b *journalFile) sync() error {
	if err := fdatasync(b.f); err != nil {
		return fmt.Errorf("audit log: sync journal of %s: %w", b.day, err)
	}
	return nil
}

func (b *journalFile) close() error {
	if b.f == nil {
		return nil
	}
	err := b.f.Close()
	b.f, b.day = nil, ""
	if err != nil {
		return fmt.Errorf("audit log: close journal: %w", err)
	}
	return nil
}

// readBodies reads an event's bodies from the journal of day.
func readBodies(dir, day string, off, reqLen, respLen uint64) (req, resp []byte, err error) {
	f, err := os.Open(journalPath(dir, day))
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	buf := make([]byte, reqLen+respLen)
	if _, err := f.ReadAt(buf, int64(off)); err != nil {
		return nil, nil, err
	}
	return buf[:reqLen:reqLen], buf[reqLen:], nil
}

// journalDays lists the days that have a journal file, oldest first.
func journalDays(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("audit log: list journal files: %w", err)
	}
	var days []string
	for _, e := range entries {
		day, ok := strings.CutSuffix(e.Name(), journalSuffix)
		if _, err := ids.ParseDay(day); ok && err == nil {
			days = append(days, day)
		}
	}
	return days, nil
}

// syncDir makes the entries of dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("audit log: sync %s: %w", dir, err)
	}
	return nil
}
