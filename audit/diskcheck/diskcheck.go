// Package diskcheck measures what a durable audit event costs on a site's
// disk: the disk's own flush latency, the floor of any durable group
// commit at the offered rate, and the audit log itself appending
// gateway-sized events at that rate, with the budget the audit step is
// held to (docs/audit-format.md, "Checking a site's disk"). It writes
// only to a directory of its own, removed afterwards (or, when an
// interrupt meets a stalled disk, once the disk answers; see Run).
package diskcheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/audit/syncload"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// Defaults and bounds of Options.
const (
	DefaultEvents = 12000
	DefaultRate   = 1000
	// DefaultBudget is what the audit step may add to a request at p99.
	DefaultBudget = time.Millisecond
	// MaxEvents bounds a run's disk use: about 3 KiB per event in the
	// floor's file and 4 KiB in the log (journal and audit.db), so at
	// most ~700 MiB, removed afterwards.
	MaxEvents = 100_000
	MaxRate   = 100_000
	// syncsMax bounds the one-at-a-time flush probe: it runs at the
	// disk's pace, not the offered rate.
	syncsMax = 2000
	// recordSize is the floor's record: about an event's journal frame.
	recordSize = 3 << 10
	// applianceID names the throwaway log; no head is ever signed.
	applianceID = "app_diskcheck"
)

// Bodies of a typical chat completion: ~1 KiB in, ~2 KiB out.
var (
	requestBody  = bytes.Repeat([]byte(`{"role":"user","content":"abcdefgh"}`), 28)
	responseBody = bytes.Repeat([]byte(`data: {"choices":[{"delta":{"content":"xy"}}]}`), 44)
	tenants      = [...]string{"acme", "globex", "initech", "umbrella"}
)

// Options of a run. Zero values take the defaults.
type Options struct {
	// Dir is a directory on the disk to measure (the appliance's data
	// directory, or the audit journal's mount); it must exist.
	Dir string
	// Events is how many events each stage offers.
	Events int
	// Rate is the offered events per second.
	Rate int
	// Even spaces arrivals evenly instead of as a Poisson process.
	Even bool
}

func (o Options) withDefaults() (Options, error) {
	if o.Events == 0 {
		o.Events = DefaultEvents
	}
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	switch {
	case o.Dir == "":
		return o, errors.New("diskcheck: a directory is required")
	case o.Events < 100 || o.Events > MaxEvents:
		return o, fmt.Errorf("diskcheck: events %d outside [100, %d]", o.Events, MaxEvents)
	case o.Rate < 1 || o.Rate > MaxRate:
		return o, fmt.Errorf("diskcheck: rate %d outside [1, %d]", o.Rate, MaxRate)
	}
	if info, err := os.Stat(o.Dir); err != nil {
		return o, fmt.Errorf("diskcheck: %w", err)
	} else if !info.IsDir() {
		return o, fmt.Errorf("diskcheck: %s is not a directory", o.Dir)
	}
	return o, nil
}

// Report is what a run measured.
type Report struct {
	Options Options
	// Syncs: one 4 KiB write and fdatasync at a time.
	Syncs syncload.Summary
	// Floor: the least a durable group commit costs at the offered
	// arrivals (syncload.Floor).
	Floor syncload.Summary
	// Append: the audit log's Append at the same arrivals, leaf building
	// included: the audit step of a request.
	Append syncload.Summary
	// Late counts arrivals of the floor and append stages that could not
	// be offered on time (syncload.Result.Late): when it is not 0, the
	// figures understate the tail.
	Late int
	// EventsPerSecond is what the log absorbed; EventsPerCommit is how
	// many events shared a journal sync.
	EventsPerSecond float64
	EventsPerCommit float64
}

// Within reports whether the audit step's p99 is within budget.
func (r Report) Within(budget time.Duration) bool { return r.Append.P99 <= budget }

// interruptGrace is how long an interrupted run waits for the disk work
// it had started (syncs, appends and the log's close, all waiting on
// fdatasync) so that it can remove its directory: on a healthy disk that
// work ends within milliseconds; on a stalled one it may not end at all,
// and an interrupt must not wait for it.
const interruptGrace = time.Second

// ErrInterrupted is returned, wrapped, when Run's context ended before
// the run did: there is no verdict.
var ErrInterrupted = errors.New("interrupted")

// The stages, as variables: tests replace one with a call that blocks as
// a stalled disk does, whatever its context says.
var (
	syncsStage  = syncload.Syncs
	floorStage  = syncload.Floor
	appendStage = appendLoad
)

// measuring counts runs still measuring or removing their directory,
// those an interrupt stopped waiting for included: tests wait on it.
var measuring sync.WaitGroup

// Run measures the three stages one after another in a directory of its
// own under opts.Dir, which it removes. When ctx ends no further load is
// offered, and Run returns ErrInterrupted once the work already on the
// disk has ended, or after interruptGrace if it has not (a stalled disk):
// then the directory is removed only when that work ends, if the process
// lives that long, and the error names it.
func Run(ctx context.Context, opts Options) (Report, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return Report{}, err
	}
	dir, err := os.MkdirTemp(opts.Dir, "tollgate-check-disk-*")
	if err != nil {
		return Report{}, fmt.Errorf("diskcheck: %w", err)
	}
	type outcome struct {
		rep Report
		err error
	}
	done := make(chan outcome, 1)
	measuring.Go(func() {
		rep, err := measure(ctx, dir, opts)
		_ = os.RemoveAll(dir)
		done <- outcome{rep, err}
	})
	var o outcome
	select {
	case o = <-done:
	case <-ctx.Done():
		grace := time.NewTimer(interruptGrace)
		defer grace.Stop()
		select {
		case o = <-done:
		case <-grace.C:
			return Report{Options: opts}, fmt.Errorf("diskcheck: %w (%w) with writes still waiting on the disk after %s; "+
				"not waiting for them: %s may be left behind, remove it once the disk answers", ErrInterrupted, context.Cause(ctx), interruptGrace, dir)
		}
	}
	if o.err != nil && ctx.Err() != nil {
		return o.rep, fmt.Errorf("diskcheck: %w (%w)", ErrInterrupted, context.Cause(ctx))
	}
	return o.rep, o.err
}

// measure runs the stages in dir; ctx ends it between stages.
func measure(ctx context.Context, dir string, opts Options) (Report, error) {
	rep := Report{Options: opts}
	at := syncload.Arrivals(opts.Events, opts.Rate, !opts.Even)

	syncs, err := syncsStage(ctx, dir, min(opts.Events, syncsMax))
	if err != nil {
		return rep, err
	}
	rep.Syncs = syncload.Summarize(syncs)
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	floor, err := floorStage(ctx, dir, at, recordSize)
	if err != nil {
		return rep, err
	}
	rep.Floor, rep.Late = syncload.Summarize(floor.Latencies), floor.Late
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	if err := appendStage(ctx, dir, at, &rep); err != nil {
		return rep, err
	}
	return rep, nil
}

// appendLoad appends one event per arrival to a new audit log in dir and
// checks that every one was committed.
func appendLoad(ctx context.Context, dir string, at []time.Duration, rep *Report) (err error) {
	l, err := auditlog.Open(dir, auditlog.Options{ApplianceID: applianceID})
	if err != nil {
		return fmt.Errorf("diskcheck: %w", err)
	}
	defer func() { err = errors.Join(err, l.Close()) }()
	// Request ids of this run: time-ordered, as the gateway's are, so that
	// the index sees the same access pattern.
	reqs := make([]string, len(at))
	base := time.Now()
	for i := range reqs {
		reqs[i] = ids.RequestAt(base.Add(time.Duration(i) * time.Microsecond))
	}
	errs := make([]error, len(at))
	res := syncload.Run(ctx, at, func(i int) {
		_, errs[i] = l.Append(ctx, event(reqs[i], i))
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("diskcheck: append: %w", err)
	}
	st := l.Stats()
	if st.Events != uint64(len(at)) {
		return fmt.Errorf("diskcheck: the log committed %d events of %d appended", st.Events, len(at))
	}
	rep.Append, rep.Late = syncload.Summarize(res.Latencies), rep.Late+res.Late
	rep.EventsPerSecond = float64(len(at)) / res.Elapsed.Seconds()
	rep.EventsPerCommit = float64(st.Events) / float64(max(st.Commits, 1))
	return nil
}

// event is the i-th event of a run: a chat completion of one of four
// tenants, with a policy decision and gateway-sized bodies.
func event(requestID string, i int) auditlog.Event {
	tenant := tenants[i%len(tenants)]
	return auditlog.Event{
		RequestID: requestID, TenantID: tenant, KeyID: "key_" + tenant,
		Time: time.Now(), Endpoint: "/v1/chat/completions", Model: "builtin/echo", Status: 200,
		PromptTokens: 120, CompletionTokens: 240, PolicyDecisionID: "dec_0123456789abcdef0123456789abcdef",
		RequestBody: requestBody, ResponseBody: responseBody,
	}
}
