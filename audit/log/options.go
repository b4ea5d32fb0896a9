package log

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/tollgate-dev/tollgate/audit/fleet"
	"github.com/tollgate-dev/tollgate/internal/durable"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// Retention bounds for request and response bodies.
const (
	DefaultRetention = 90 * 24 * time.Hour
	// MaxRetention is 7 years: 7×365 days plus the 2 leap days any 7
	// consecutive years hold at most.
	MaxRetention = (7*365 + 2) * 24 * time.Hour
	// MinRetention is a day: bodies are pruned by whole UTC days.
	MinRetention = 24 * time.Hour
)

// Queue and batch defaults.
const (
	DefaultQueueSize     = 8192
	DefaultMaxBatch      = 2048
	DefaultMaxBatchBytes = 16 << 20
	// DefaultApplyInterval: rare, large applies to audit.db overlap
	// fewer journal syncs than frequent small ones (apply.go); readers
	// that need audit.db current wait for one apply at most.
	DefaultApplyInterval = 10 * time.Second
	// DefaultSpaceProbeInterval: a full disk is noticed to have room again
	// within a second of it being freed.
	DefaultSpaceProbeInterval = time.Second
	// DefaultMaxSyncsInFlight: one sync at a time, everything arriving
	// meanwhile joining the next batch, gave the lowest latency through
	// the whole gateway (docs/audit-format.md).
	DefaultMaxSyncsInFlight = 1
)

// Options configure a log. Zero values take the defaults.
type Options struct {
	// ApplianceID is app_<id>; it may be left empty when Signer is set.
	ApplianceID string
	// Retention of request and response bodies; 0 means DefaultRetention.
	Retention time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Signer signs heads; nil means heads cannot be signed (ErrNoSigner).
	Signer *fleet.Appliance
	Logger *slog.Logger
	// QueueSize bounds the appends waiting for the committer. A full queue
	// blocks Append (until its context ends); nothing is ever dropped.
	QueueSize int
	// MaxBatch and MaxBatchBytes bound one group commit.
	MaxBatch      int
	MaxBatchBytes int
	// MaxSyncsInFlight bounds the journal syncs that overlap (see
	// commitLoop), each on a file description of its own (journalFile);
	// 0 means DefaultMaxSyncsInFlight, 1 syncs one batch at a time.
	MaxSyncsInFlight int
	// ApplyInterval is the least time between two transactions applying
	// the journal to audit.db (see apply.go); 0 means
	// DefaultApplyInterval.
	ApplyInterval time.Duration
	// JournalDir is the directory of the journal files; empty means
	// "journal" (the JournalDir constant) in the log's directory. Every
	// acknowledged event waits for a sync of the journal, so a disk of its
	// own, away from audit.db's commits (which sync too), shortens the
	// appends' tail. The directory is bound to the log at its first open:
	// later opens must give the same one (moved whole, if at all), and a
	// directory serves one log (journaldir.go).
	JournalDir string
	// SpaceProbeInterval is how often a log whose disk is full (ErrDiskFull)
	// tries to write a probe to learn that space has returned; 0 means
	// DefaultSpaceProbeInterval.
	SpaceProbeInterval time.Duration
	// SyncStarts makes a batch of stream starts durable in the start
	// file; nil means fdatasync (durable.DataSync). Tests hold it, to see
	// that nothing of a stream is sent before its start is durable.
	SyncStarts func(*os.File) error
}

// CheckRetention reports whether d is an acceptable body retention (0 means
// the default). Callers use it to refuse a flag at start.
func CheckRetention(d time.Duration) error {
	if d == 0 {
		return nil
	}
	if d < MinRetention || d > MaxRetention {
		return fmt.Errorf("audit log: retention %s outside [%s, %s] (1 day to 7 years)", d, MinRetention, MaxRetention)
	}
	return nil
}

// withDefaults validates o and fills in the defaults.
func (o Options) withDefaults() (Options, error) {
	if o.ApplianceID == "" && o.Signer != nil {
		o.ApplianceID = o.Signer.ID
	}
	if err := ids.CheckAppliance(o.ApplianceID); err != nil {
		return o, fmt.Errorf("audit log: %w", err)
	}
	if o.Signer != nil && o.Signer.ID != o.ApplianceID {
		return o, fmt.Errorf("audit log: certificate is for %s, not %s", o.Signer.ID, o.ApplianceID)
	}
	if err := CheckRetention(o.Retention); err != nil {
		return o, err
	}
	if o.Retention == 0 {
		o.Retention = DefaultRetention
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if o.MaxSyncsInFlight <= 0 {
		o.MaxSyncsInFlight = DefaultMaxSyncsInFlight
	}
	if o.ApplyInterval <= 0 {
		o.ApplyInterval = DefaultApplyInterval
	}
	if o.SyncStarts == nil {
		o.SyncStarts = durable.DataSync
	}
	if o.SpaceProbeInterval <= 0 {
		o.SpaceProbeInterval = DefaultSpaceProbeInterval
	}
	return o, nil
}
