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

// Request and response bodies live outside bbolt, in one append-only file
// per UTC day under BodiesDir: pruning a day is unlinking its file, and the
// bbolt file holds only what is kept for good (leaves, trees, heads). An
// event's record in bbolt holds the offset and lengths of its bodies; their
// SHA-256 digests in the leaf check them on read.

// BodiesDir is the directory of body files in the log's directory.
const BodiesDir = "bodies"

const bodyFileSuffix = ".bodies"

// bodyFile is the open body file of the day being written. It is used by
// the committer only.
type bodyFile struct {
	dir string
	day string
	f   *os.File
}

func bodyPath(dir, day string) string {
	return filepath.Join(dir, day+bodyFileSuffix)
}

// open makes f the file of day, created if missing, with its content cut
// to end: bytes past end were written for a batch whose transaction never
// committed.
func (b *bodyFile) open(day string, end uint64) error {
	if b.f != nil && b.day == day {
		return nil
	}
	if err := b.close(); err != nil {
		return err
	}
	path := bodyPath(b.dir, day)
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit log: body file: %w", err)
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
		return fmt.Errorf("audit log: body file: %w", err)
	}
	if uint64(info.Size()) > end {
		if err := f.Truncate(int64(end)); err != nil {
			_ = f.Close()
			return fmt.Errorf("audit log: trim body file %s: %w", path, err)
		}
	}
	b.f, b.day = f, day
	return nil
}

// write stores data at off in the open file (not yet synced).
func (b *bodyFile) write(data []byte, off uint64) error {
	if _, err := b.f.WriteAt(data, int64(off)); err != nil {
		return fmt.Errorf("audit log: write bodies of %s: %w", b.day, err)
	}
	return nil
}

// sync makes the written bodies durable.
func (b *bodyFile) sync() error {
	if err := b.f.Sync(); err != nil {
		return fmt.Errorf("audit log: sync bodies of %s: %w", b.day, err)
	}
	return nil
}

func (b *bodyFile) close() error {
	if b.f == nil {
		return nil
	}
	err := b.f.Close()
	b.f, b.day = nil, ""
	if err != nil {
		return fmt.Errorf("audit log: close body file: %w", err)
	}
	return nil
}

// readBodies reads an event's bodies from the file of day.
func readBodies(dir, day string, off, reqLen, respLen uint64) (req, resp []byte, err error) {
	f, err := os.Open(bodyPath(dir, day))
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

// bodyDays lists the days that have a body file, oldest first.
func bodyDays(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("audit log: list body files: %w", err)
	}
	var days []string
	for _, e := range entries {
		day, ok := strings.CutSuffix(e.Name(), bodyFileSuffix)
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
