package log

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tollgate-dev/tollgate/internal/durable"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// Request and response bodies stay in the journal (see journal.go): an
// event's record in audit.db holds the offset and lengths of its bodies in
// its day's journal file, and their SHA-256 digests in the leaf check them
// on read.

// journalFile is the open journal file of the day being written. It is
// used by the committer only.
//
// The file is kept zero-filled (and synced) ahead of the writes: an
// fdatasync after overwriting allocated blocks flushes only data, while one
// after an append also commits the file system's journal for the new size
// and extents, about twice the time on the disks measured. A zero-fill of
// journalChunk runs in the background whenever less than journalAhead is
// left; a write that would overlap a running fill waits for it (and a write
// past the filled space just appends). Correctness never depends on the
// fill: every batch is fdatasynced, which persists whatever metadata it
// needs. The zeros past the last frame are cut when the day's file is
// closed, and by recovery after a crash.
type journalFile struct {
	dir string
	// syncs is how many syncs may run at once (MaxSyncsInFlight).
	syncs int
	day   string
	f     *os.File
	// syncFiles are the file descriptions syncs run on, syncFiles[0] being
	// f: one per sync slot, opened with the file and kept, because Linux
	// reports a writeback error once per open file description and since
	// that description last synced. Two syncs sharing one could split a
	// report; a description opened later would miss an error reported
	// before. Sync k uses syncFiles[k % syncs], free by then: syncs are
	// acknowledged in order and at most syncs run.
	syncFiles []*os.File
	nextSync  uint64
	// filled is the size the file has (data and zeros) once no fill runs.
	filled uint64
	// fill is non-nil while a zero-fill of [fillFrom, fillTo) runs.
	fill             chan error
	fillFrom, fillTo uint64
}

// A fill of 1 MiB and its sync take ~1.3-2.5 ms here; 4 MiB fills stalled
// the journal's own syncs behind them (p99 tens of ms at 5,000 events/s).
// A journal sync that overlaps a fill waits for it, so fills start when
// the committer is idle (fillAhead) while less than journalAhead is
// filled, and from a write only when less than journalLow is left.
const (
	journalChunk = 1 << 20
	journalAhead = 2 << 20
	journalLow   = 512 << 10
	fillGap      = 256 << 10
)

// zeros is the content of a fill, never written to: a zero-valued array,
// so its pages are the kernel's shared zero page, outside the Go heap and
// the process's RSS (a slice made at start was 1 MiB of live heap, which
// GOGC=400 lets grow up to five times in the heap below the soft limit).
var zeros [journalChunk]byte

func journalPath(dir, day string) string {
	return filepath.Join(dir, day+journalSuffix)
}

// open makes f the file of day, created if missing. Its size must be end:
// recovery at Open cut any torn tail, and the committer alone writes.
func (b *journalFile) open(day string, end uint64) error {
	if b.f != nil && b.day == day {
		return nil
	}
	if b.f != nil {
		return fmt.Errorf("audit log: journal of %s still open for %s", b.day, day)
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
	files := []*os.File{f}
	for len(files) < max(b.syncs, 1) {
		g, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			closeAll(files)
			return fmt.Errorf("audit log: journal: %w", err)
		}
		files = append(files, g)
	}
	b.f, b.syncFiles, b.day, b.filled = f, files, day, end
	return nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// write stores data at off in the open file (not yet synced).
func (b *journalFile) write(data []byte, off uint64) error {
	end := off + uint64(len(data))
	if b.fill != nil {
		if end > b.fillFrom {
			b.endFill(<-b.fill) // the fill covers bytes this write needs
		} else {
			select {
			case err := <-b.fill:
				b.endFill(err)
			default:
			}
		}
	}
	if _, err := batchWrite(b.f, data, int64(off)); err != nil {
		return fmt.Errorf("audit log: write journal of %s: %w", b.day, err)
	}
	b.filled = max(b.filled, end)
	if b.fill == nil && b.filled < end+journalLow {
		b.startFill(end)
	}
	return nil
}

// fillAhead starts a zero-fill if less than journalAhead is filled past
// end and none runs. The committer calls it when idle: no batch is
// waiting, so the fill overlaps only syncs of appends arriving during it.
func (b *journalFile) fillAhead(end uint64) {
	if b.f == nil {
		return
	}
	if b.fill != nil {
		select {
		case err := <-b.fill:
			b.endFill(err)
		default:
			return
		}
	}
	if b.filled < end+journalAhead {
		b.startFill(end)
	}
}

// startFill zero-fills a chunk past the file's end, in the background,
// and syncs it. It starts fillGap past the last write when the file ends
// there (a new file), so that the next writes append into the gap instead
// of waiting for the fill.
func (b *journalFile) startFill(end uint64) {
	path, from := b.f.Name(), max(b.filled, end+fillGap)
	done := make(chan error, 1)
	b.fill, b.fillFrom, b.fillTo = done, from, from+journalChunk
	go func() { done <- zeroFill(path, from) }()
}

// zeroFill writes and syncs journalChunk zeros at from, through a file
// description of its own. Linux reports a writeback error of a file once
// per open file description: a fill syncing through the journal's own
// description could take the report of a failed journal page, whose
// batch's sync would then succeed. With its own, the fill sees the error
// too (and ignores it, as it ignores its own), and the journal's sync
// still reports it.
func zeroFill(path string, from uint64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(zeros[:], int64(from))
	if err == nil {
		err = durable.DataSync(f)
	}
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	return err
}

// endFill records the outcome of the running fill. A failed fill only
// costs speed (writes append instead), so it is not an error of the log.
func (b *journalFile) endFill(err error) {
	if err == nil {
		b.filled = max(b.filled, b.fillTo)
	}
	b.fill = nil
}

// batchWrite writes a batch and batchSync makes it durable; tests make
// them fail.
var (
	batchWrite = (*os.File).WriteAt
	batchSync  = durable.DataSync
)

// syncer returns a function that makes what was written so far durable; it
// may run while the committer writes on.
func (b *journalFile) syncer() func() error {
	f, day := b.syncFiles[b.nextSync%uint64(len(b.syncFiles))], b.day
	b.nextSync++
	return func() error {
		if err := batchSync(f); err != nil {
			return fmt.Errorf("audit log: sync journal of %s: %w", day, err)
		}
		return nil
	}
}

// scrub cuts the open file at end, dropping from the page cache whatever
// was written past it, and syncs. The committer must not write on: its
// batches past end failed (see Log.scrubFailed), or found the disk full
// (Log.commitNoSpace). A cut needs no space, so it works where an
// overwrite might not (a full disk). It first waits for a running
// zero-fill, which would otherwise extend the file again past the cut
// (with zeros, which end a journal as well, but hold space a full disk
// needs back).
func (b *journalFile) scrub(end uint64) error {
	if b.f == nil {
		return nil
	}
	if b.fill != nil {
		b.endFill(<-b.fill)
	}
	if err := b.f.Truncate(int64(end)); err != nil {
		return fmt.Errorf("audit log: scrub journal of %s: %w", b.day, err)
	}
	b.filled = min(b.filled, end)
	if err := durable.DataSync(b.f); err != nil {
		return fmt.Errorf("audit log: scrub journal of %s: %w", b.day, err)
	}
	return nil
}

// cut is scrub for a batch that found the disk full while earlier batches
// may still be syncing: it cuts the file at end through a file
// description of its own, and syncs that one. A sync on f could take
// the report of a writeback error that a running batch's sync must see
// (see syncFiles); a description opened now reports only later errors
// and takes none from the others.
func (b *journalFile) cut(end uint64) error {
	if b.f == nil {
		return nil
	}
	if b.fill != nil {
		b.endFill(<-b.fill)
	}
	f, err := os.OpenFile(b.f.Name(), os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("audit log: cut journal of %s: %w", b.day, err)
	}
	err = f.Truncate(int64(end))
	if err == nil {
		err = durable.DataSync(f)
	}
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("audit log: cut journal of %s: %w", b.day, err)
	}
	b.filled = min(b.filled, end)
	return nil
}

// close waits for a running fill, cuts the zeros past end (the end of the
// last frame), syncs and closes the file. No sync may be running.
func (b *journalFile) close(end uint64) error {
	if b.f == nil {
		return nil
	}
	if b.fill != nil {
		b.endFill(<-b.fill)
	}
	f := b.f
	closeAll(b.syncFiles[1:])
	b.f, b.syncFiles, b.day, b.filled = nil, nil, "", 0
	err := f.Truncate(int64(end))
	if err == nil {
		err = durable.DataSync(f)
	}
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("audit log: close journal: %w", err)
	}
	return nil
}

// readBodies reads an event's bodies from the journal of day and returns
// them as received and sent. Stored bodies that cannot be what the record
// says (lengths no append stores, bytes past the file's end, compressed
// data that does not decompress to exactly the bodies' lengths) are
// errBodiesDamaged, found without allocating more than those lengths.
func readBodies(dir, day string, ev eventRecord) (req, resp []byte, err error) {
	if err := checkBodyLengths(ev.reqLen, ev.respLen, ev.storedLen); err != nil {
		return nil, nil, err
	}
	f, err := os.Open(journalPath(dir, day))
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if size := uint64(info.Size()); ev.bodyOff > size || ev.storedLen > size-ev.bodyOff {
		return nil, nil, fmt.Errorf("%w: %d bytes at %d, past the journal's end at %d", errBodiesDamaged, ev.storedLen, ev.bodyOff, size)
	}
	stored := make([]byte, ev.storedLen)
	if _, err := f.ReadAt(stored, int64(ev.bodyOff)); err != nil {
		return nil, nil, err
	}
	bodies, err := decodeBodies(ev.codec, stored, ev.reqLen+ev.respLen)
	if err != nil {
		return nil, nil, err
	}
	return bodies[:ev.reqLen:ev.reqLen], bodies[ev.reqLen:], nil
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
	if err := durable.SyncDir(dir); err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	return nil
}
