package service

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/central/apierr"
	"github.com/tollgate-dev/tollgate/central/centralclient"
	"github.com/tollgate-dev/tollgate/central/ingest"
	"github.com/tollgate-dev/tollgate/central/store"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
)

// DefaultMaxLeaves bounds the leaves of one PublishHead stream (they are
// held in memory until the head verifies): 4 Mi leaves. docs/central.md
// ("Limits") has what a leaf costs.
const DefaultMaxLeaves = 4 << 20

// DefaultMaxUploads bounds the PublishHead streams in progress across the
// plane: an appliance sends one at a time, and a head of a few thousand
// leaves takes some 20-30 ms, so 128 at once is a fleet of thousands
// publishing every second, with room to spare.
const DefaultMaxUploads = 128

// DefaultMaxPendingLeaves bounds the leaves of every upload in progress
// together: two of the largest uploads, so that one of them is admitted
// beside the usual small ones instead of waiting for an idle plane.
const DefaultMaxPendingLeaves = 2 * DefaultMaxLeaves

// DefaultMaxUploadsPerAppliance bounds one appliance's uploads in
// progress: its forwarder sends one at a time, and the second is one it
// gave up on (a client-side timeout) that the plane has not yet seen end.
// Without it one appliance, or a stolen certificate, could hold every
// slot of the plane.
const DefaultMaxUploadsPerAppliance = 2

// DefaultIdleTimeout bounds how long an upload may wait for its next
// message (the start message, a leaf chunk, the client's close). The
// forwarder reads an upload's leaves before it opens the stream and then
// sends its messages back to back, chunks of 4,096 leaves (some 350 KiB,
// up to some 500 KiB with 64-character request ids), so the gap between two
// messages is the time one chunk takes on the wire: 30 s is a link of some
// 100-140 kbit/s, while an upload that sends nothing gives its share of
// the budget back within half a minute.
const DefaultIdleTimeout = 30 * time.Second

// DefaultMaxUploadTime bounds an upload's reception, from its stream's
// start to its close, so that one that sends a message just inside the
// idle timeout each time cannot hold its share of the budget for ever.
// The largest upload, 4 Mi leaves in chunks of some 350 KiB (27-character
// request ids) to 500 KiB (64-character ones) per 4,096 leaves, is 350 to
// 500 MiB on the wire: 10 minutes is that at some 5 to 7 Mbit/s, while an
// upload of a few thousand leaves fits at a few kbit/s.
const DefaultMaxUploadTime = 10 * time.Minute

// IngestOptions configure an Ingest.
type IngestOptions struct {
	// Now is the clock the caller's certificate is checked at (nil:
	// time.Now).
	Now func() time.Time
	// MaxLeaves bounds one upload (0: DefaultMaxLeaves); a larger one is
	// refused for good (ResourceExhausted).
	MaxLeaves int
	// MaxUploads bounds the uploads in progress (0: DefaultMaxUploads) and
	// MaxPendingLeaves the leaves they announce together (0:
	// DefaultMaxPendingLeaves; at least MaxLeaves). An upload beyond either
	// is refused at once with Unavailable, which an appliance retries.
	MaxUploads, MaxPendingLeaves int
	// MaxUploadsPerAppliance bounds one appliance's uploads in progress
	// (0: DefaultMaxUploadsPerAppliance), refused beyond as MaxUploads.
	MaxUploadsPerAppliance int
	// IdleTimeout bounds the wait for each message of an upload, from the
	// stream's start or the previous message (0: DefaultIdleTimeout). An
	// upload idle for longer is ended with DeadlineExceeded, which an
	// appliance retries, and returns its share of the budget.
	IdleTimeout time.Duration
	// MaxUploadTime bounds an upload's reception, from the stream's start
	// to the client's close (0: DefaultMaxUploadTime); verifying and
	// storing the head after are not counted. An upload that takes longer
	// is ended with DeadlineExceeded, as an idle one.
	MaxUploadTime time.Duration
	// OnAdmit, when set, is called once an upload has its share of the
	// budget, with the leaves its start message announced, before its
	// leaves are read (tests await stalled uploads with it).
	OnAdmit func(leaves int)
	// Metrics, when set, counts the uploads and reads the budget
	// (NewIngestMetrics).
	Metrics *IngestMetrics
	Logger  *slog.Logger
}

// Ingest implements centralv1.CentralAuditServiceServer. Serve it over TLS
// that requires and verifies client certificates against the fleet CA.
type Ingest struct {
	centralv1.UnimplementedCentralAuditServiceServer
	in     *ingest.Ingester
	ca     *x509.Certificate
	opts   IngestOptions
	budget budget
}

// NewIngest serves in; ca checks the caller's certificate.
func NewIngest(in *ingest.Ingester, ca *x509.Certificate, opts IngestOptions) (*Ingest, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxLeaves <= 0 {
		opts.MaxLeaves = DefaultMaxLeaves
	}
	if opts.MaxUploads <= 0 {
		opts.MaxUploads = DefaultMaxUploads
	}
	if opts.MaxPendingLeaves <= 0 {
		opts.MaxPendingLeaves = max(DefaultMaxPendingLeaves, opts.MaxLeaves)
	}
	if opts.MaxPendingLeaves < opts.MaxLeaves {
		// The largest upload would be refused as busy for ever.
		return nil, fmt.Errorf("service: %d pending leaves cannot hold an upload of %d leaves", opts.MaxPendingLeaves, opts.MaxLeaves)
	}
	if opts.MaxUploadsPerAppliance <= 0 {
		opts.MaxUploadsPerAppliance = DefaultMaxUploadsPerAppliance
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.MaxUploadTime <= 0 {
		opts.MaxUploadTime = DefaultMaxUploadTime
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Ingest{in: in, ca: ca, opts: opts, budget: budget{maxUploads: opts.MaxUploads, maxPerAppliance: opts.MaxUploadsPerAppliance,
		maxLeaves: opts.MaxPendingLeaves, maxLeavesPer: opts.MaxLeaves, perAppliance: map[string]held{}}}
	if opts.Metrics != nil {
		opts.Metrics.budget.Store(&s.budget)
	}
	return s, nil
}

// PublishHead receives a head and its leaves, then verifies and stores it.
// The upload holds a slot and the leaves its start message announces of
// the plane's budget until it is answered; beyond the budget it is
// refused at once rather than queued, since a queued stream would hold
// its start message and connection while it waits. Each message must
// arrive within the idle timeout of the previous one (or of the stream's
// start), and the whole upload within the maximum upload time, so that an
// upload that stops sending, or trickles, gives its share back.
func (s *Ingest) PublishHead(stream grpc.ClientStreamingServer[centralv1.PublishHeadRequest, centralv1.PublishHeadResponse]) error {
	var evidence string
	outcome, reason, err := s.publishHead(stream, &evidence)
	s.opts.Metrics.count(outcome, reason, evidence)
	return err
}

// publishHead is PublishHead; it returns the upload's outcome (Outcome…)
// and its refusal's reason, if it has one, with the answer, and sets
// evidence to what became of a fork's evidence (ingest.Evidence…).
func (s *Ingest) publishHead(stream grpc.ClientStreamingServer[centralv1.PublishHeadRequest, centralv1.PublishHeadResponse], evidence *string) (string, string, error) {
	ctx := stream.Context()
	peer, err := applianceOf(ctx, s.ca, s.opts.Now())
	if err != nil {
		return OutcomeRefused, "", err
	}
	switch s.budget.admitUpload(peer) {
	case refusedPlane:
		s.opts.Logger.WarnContext(ctx, "central: upload refused, too many in progress", "appliance_id", peer, "max_uploads", s.opts.MaxUploads)
		return OutcomeBusy, "", status.Errorf(codes.Unavailable, "the central plane is busy: %d uploads in progress, the most it takes; retry later", s.opts.MaxUploads)
	case refusedAppliance:
		s.opts.Logger.WarnContext(ctx, "central: upload refused, too many of the appliance's in progress", "appliance_id", peer,
			"max_uploads_per_appliance", s.opts.MaxUploadsPerAppliance)
		return OutcomeBusy, "", status.Errorf(codes.Unavailable, "the central plane is busy: appliance %s has %d uploads in progress, the most it takes; retry later",
			peer, s.opts.MaxUploadsPerAppliance)
	}
	defer s.budget.endUpload(peer)
	in := receive(stream, s.opts.IdleTimeout, s.opts.MaxUploadTime)
	defer in.stop()
	u, n, err := s.receiveStart(in)
	if err != nil {
		return s.failedUpload(ctx, err, peer, in)
	}
	switch s.budget.takeLeaves(peer, n) {
	case refusedPlane:
		s.opts.Logger.WarnContext(ctx, "central: upload refused, pending leaves at the budget", "appliance_id", peer, "leaves", n,
			"max_pending_leaves", s.opts.MaxPendingLeaves)
		return OutcomeBusy, "", status.Errorf(codes.Unavailable, "the central plane is busy: uploads in progress hold up to %d leaves, this one needs %d more; retry later",
			s.opts.MaxPendingLeaves, n)
	case refusedAppliance:
		s.opts.Logger.WarnContext(ctx, "central: upload refused, the appliance's pending leaves at its share", "appliance_id", peer, "leaves", n,
			"max_pending_leaves_per_appliance", s.opts.MaxLeaves)
		return OutcomeBusy, "", status.Errorf(codes.Unavailable, "the central plane is busy: appliance %s's uploads in progress hold up to %d leaves, this one needs %d more; retry later",
			peer, s.opts.MaxLeaves, n)
	}
	defer s.budget.giveLeaves(peer, n)
	if s.opts.OnAdmit != nil {
		s.opts.OnAdmit(n)
	}
	if u.Leaves, err = s.receiveLeaves(in, n); err != nil {
		return s.failedUpload(ctx, err, peer, in)
	}
	res, err := s.in.Publish(ctx, peer, u)
	if r, ok := ingest.AsRefusal(err); ok {
		*evidence = r.Evidence
		return OutcomeRefused, r.Reason, toStatus(err)
	} else if err != nil {
		return OutcomeFailed, "", toStatus(err)
	}
	outcome := OutcomeStored
	if res.Duplicate {
		outcome = OutcomeDuplicate
	} else {
		s.opts.Metrics.stored(res.Leaves)
	}
	return outcome, "", stream.SendAndClose(&centralv1.PublishHeadResponse{EventCount: uint32(res.EventCount), Duplicate: res.Duplicate})
}

// failedUpload is idleOr's answer to an upload that failed before its
// head was checked, with its outcome: incomplete when it went idle, took
// too long, ended before its leaves or its appliance went away (all of
// which the appliance retries), refused otherwise (a malformed stream,
// too many leaves), with the reason of a refusal.
func (s *Ingest) failedUpload(ctx context.Context, err error, peer string, in *receiver) (string, string, error) {
	if reason, _, ok := centralclient.RefusalOf(err); ok {
		return OutcomeRefused, reason, s.idleOr(ctx, err, peer, in)
	}
	switch status.Code(err) {
	case codes.InvalidArgument, codes.ResourceExhausted:
		return OutcomeRefused, "", s.idleOr(ctx, err, peer, in)
	}
	return OutcomeIncomplete, "", s.idleOr(ctx, err, peer, in)
}

// idleOr returns err, or when the upload went idle or took too long, logs
// it and returns DeadlineExceeded, or when it ended short, Aborted: not a
// refusal, so the appliance keeps the head queued and sends it again.
func (s *Ingest) idleOr(ctx context.Context, err error, peer string, in *receiver) error {
	switch {
	case errors.Is(err, errEndedShort):
		s.opts.Logger.WarnContext(ctx, "central: upload ended before all its leaves arrived", "appliance_id", peer,
			"messages_received", in.received, "err", err)
		return status.Errorf(codes.Aborted, "%v; send the upload again", err)
	case errors.Is(err, errIdle):
		s.opts.Logger.WarnContext(ctx, "central: upload ended, idle too long", "appliance_id", peer,
			"idle_timeout", s.opts.IdleTimeout.String(), "messages_received", in.received)
		return status.Errorf(codes.DeadlineExceeded, "the upload sent no message for %s, the most the central plane waits; retry", s.opts.IdleTimeout)
	case errors.Is(err, errTooLong):
		s.opts.Logger.WarnContext(ctx, "central: upload ended, took too long", "appliance_id", peer,
			"max_upload_time", s.opts.MaxUploadTime.String(), "messages_received", in.received)
		return status.Errorf(codes.DeadlineExceeded, "the upload took longer than %s, the most the central plane allows; retry", s.opts.MaxUploadTime)
	}
	return err
}

// errIdle is what receiver.next returns when no message arrived in time,
// errTooLong when the upload's time is over. errEndedShort is what
// receiveLeaves returns when the stream ended before the leaves its start
// announced: the head is not at fault, the upload is incomplete. gRPC
// retries a stream that failed before it reached the plane on another
// connection, transparently, replaying the messages sent so far; an
// appliance that stopped sending at that failure (its Send returned
// io.EOF) and asked for the status so has its upload arrive as the start
// message and the end of the stream. Refused for good, the head would be
// set aside, never stored.
var (
	errIdle       = errors.New("upload idle")
	errTooLong    = errors.New("upload too long")
	errEndedShort = errors.New("the upload ended before its leaves")
)

// receiver reads a stream's messages on a goroutine of its own, so that
// the handler can stop waiting for one: gRPC has no deadline per Recv.
// The goroutine ends once Recv fails (io.EOF included) or stop is called
// and Recv returns, which it does once the handler has returned and gRPC
// has ended the stream.
type receiver struct {
	msgs     chan received
	done     chan struct{}
	idle     time.Duration
	deadline *time.Timer
	received int
}

type received struct {
	msg *centralv1.PublishHeadRequest
	err error
}

func receive(stream grpc.ClientStreamingServer[centralv1.PublishHeadRequest, centralv1.PublishHeadResponse], idle, total time.Duration) *receiver {
	r := &receiver{msgs: make(chan received), done: make(chan struct{}), idle: idle, deadline: time.NewTimer(total)}
	go func() {
		for {
			msg, err := stream.Recv()
			select {
			case r.msgs <- received{msg, err}:
			case <-r.done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return r
}

// next returns the stream's next message, io.EOF once the client has
// closed it, errIdle when nothing arrives within the idle timeout, or
// errTooLong once the upload's time is over, even while messages keep
// arriving.
func (r *receiver) next() (*centralv1.PublishHeadRequest, error) {
	select {
	case <-r.deadline.C:
		return nil, errTooLong
	default:
	}
	t := time.NewTimer(r.idle)
	defer t.Stop()
	select {
	case m := <-r.msgs:
		if m.err == nil {
			r.received++
		}
		return m.msg, m.err
	case <-t.C:
		return nil, errIdle
	case <-r.deadline.C:
		return nil, errTooLong
	}
}

// stop releases the goroutine from handing over a message nobody reads.
func (r *receiver) stop() {
	r.deadline.Stop()
	close(r.done)
}

// budget counts the uploads in progress, per appliance and in all, and
// the leaves they announced, per appliance and in all. One appliance's
// leaves are bounded by the largest upload (maxLeavesPer), so that it
// cannot hold the whole pending-leaf budget (two of the largest uploads by
// default) for the upload time; its forwarder sends one at a time.
type budget struct {
	mu                                     sync.Mutex
	uploads, leaves                        int
	perAppliance                           map[string]held
	maxUploads, maxPerAppliance, maxLeaves int
	maxLeavesPer                           int
}

// held is what one appliance's uploads in progress hold; an appliance
// without any has no entry (its leaves go back before its slot does).
type held struct{ uploads, leaves int }

// Which limit refused an upload (admitUpload).
const (
	admitted = iota
	refusedPlane
	refusedAppliance
)

// admitUpload reserves a slot for one of appliance's uploads, or reports
// the limit that refuses it.
func (b *budget) admitUpload(appliance string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.perAppliance[appliance]
	switch {
	case h.uploads >= b.maxPerAppliance:
		return refusedAppliance
	case b.uploads >= b.maxUploads:
		return refusedPlane
	}
	b.uploads++
	h.uploads++
	b.perAppliance[appliance] = h
	return admitted
}

// endUpload returns the slot admitUpload reserved.
func (b *budget) endUpload(appliance string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.uploads--
	h := b.perAppliance[appliance]
	if h.uploads--; h.uploads > 0 {
		b.perAppliance[appliance] = h
	} else {
		delete(b.perAppliance, appliance)
	}
}

// takeLeaves reserves n leaves of appliance's, which holds a slot, if they
// fit, or reports the limit that refuses them.
func (b *budget) takeLeaves(appliance string, n int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.perAppliance[appliance]
	switch {
	case h.leaves+n > b.maxLeavesPer:
		return refusedAppliance
	case b.leaves+n > b.maxLeaves:
		return refusedPlane
	}
	b.leaves += n
	h.leaves += n
	b.perAppliance[appliance] = h
	return admitted
}

// giveLeaves returns what takeLeaves reserved.
func (b *budget) giveLeaves(appliance string, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.leaves -= n
	h := b.perAppliance[appliance]
	h.leaves -= n
	b.perAppliance[appliance] = h
}

// receiveStart reads the start message of a stream and returns the upload
// it opens with the number of leaves it announces.
func (s *Ingest) receiveStart(in *receiver) (ingest.Upload, int, error) {
	first, err := in.next()
	if err != nil {
		return ingest.Upload{}, 0, recvErr(err)
	}
	start := first.GetStart()
	if start == nil {
		return ingest.Upload{}, 0, status.Error(codes.InvalidArgument, "the first message of PublishHead must be start")
	}
	u := ingest.Upload{
		Head:              HeadFromProto(start.GetHead()),
		FirstLeafIndex:    uint64(start.GetFirstLeafIndex()),
		LeafRetentionDays: int(start.GetLeafRetentionDays()),
	}
	n := u.Head.EventCount - min(u.FirstLeafIndex, u.Head.EventCount)
	if n > uint64(s.opts.MaxLeaves) {
		return ingest.Upload{}, 0, status.Errorf(codes.ResourceExhausted, "an upload holds at most %d leaves, this head needs %d", s.opts.MaxLeaves, n)
	}
	return u, int(n), nil
}

// receiveLeaves reads the leaf chunks of a stream: n leaves, as its start
// message announced. More is refused as soon as it arrives, so that an
// upload holds no more than its share of the budget.
func (s *Ingest) receiveLeaves(in *receiver, n int) ([]store.Leaf, error) {
	var leaves []store.Leaf
	for {
		msg, err := in.next()
		if errors.Is(err, io.EOF) {
			if len(leaves) < n {
				return nil, fmt.Errorf("%w: %d of the %d leaves its start announced", errEndedShort, len(leaves), n)
			}
			return leaves, nil
		}
		if err != nil {
			return nil, recvErr(err)
		}
		chunk := msg.GetLeaves()
		if chunk == nil {
			return nil, status.Error(codes.InvalidArgument, "only the first message of PublishHead may be start")
		}
		if len(leaves)+len(chunk.GetLeaves()) > n {
			return nil, toStatus(&ingest.Refusal{Class: ingest.Invalid, Reason: ingest.ReasonInvalidLeaves,
				Err: fmt.Errorf("the head adds %d leaves from its first leaf index; the upload sends more", n)})
		}
		for _, l := range chunk.GetLeaves() {
			leaves = append(leaves, LeafFromProto(l))
		}
	}
}

func recvErr(err error) error {
	if errors.Is(err, errIdle) || errors.Is(err, errTooLong) {
		return err
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Canceled, err.Error())
}

// toStatus maps an ingest error to a gRPC status: a refusal keeps its
// reason (and the stored event_count) in an ErrorInfo.
func toStatus(err error) error {
	r, ok := ingest.AsRefusal(err)
	if !ok {
		return status.Error(codes.Internal, "storing the head failed")
	}
	code := codes.Internal
	switch r.Class {
	case ingest.Invalid:
		code = codes.InvalidArgument
	case ingest.Denied:
		code = codes.PermissionDenied
	case ingest.Precondition:
		code = codes.FailedPrecondition
	case ingest.Conflict:
		code = codes.Aborted
	}
	return apierr.WithMetadata(code, r.Reason, r.Err.Error(),
		map[string]string{centralclient.MetaStoredEventCount: strconv.FormatUint(r.StoredEventCount, 10)})
}
