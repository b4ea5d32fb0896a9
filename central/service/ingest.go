package service

import (
	"crypto/x509"
	"errors"
	"io"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/central/apierr"
	"github.com/tollgate-dev/tollgate/central/ingest"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
)

// DefaultMaxLeaves bounds the leaves of one PublishHead stream (they are
// held in memory until the head verifies): 4 Mi leaves, some 400 MiB.
const DefaultMaxLeaves = 4 << 20

// Ingest implements centralv1.CentralAuditServiceServer. Serve it over TLS
// that requires and verifies client certificates against the fleet CA.
type Ingest struct {
	centralv1.UnimplementedCentralAuditServiceServer
	in        *ingest.Ingester
	ca        *x509.Certificate
	now       func() time.Time
	maxLeaves int
}

// NewIngest serves in; ca and now check the caller's certificate; maxLeaves
// bounds an upload (0: DefaultMaxLeaves).
func NewIngest(in *ingest.Ingester, ca *x509.Certificate, now func() time.Time, maxLeaves int) *Ingest {
	if now == nil {
		now = time.Now
	}
	if maxLeaves <= 0 {
		maxLeaves = DefaultMaxLeaves
	}
	return &Ingest{in: in, ca: ca, now: now, maxLeaves: maxLeaves}
}

// PublishHead receives a head and its leaves, then verifies and stores it.
func (s *Ingest) PublishHead(stream grpc.ClientStreamingServer[centralv1.PublishHeadRequest, centralv1.PublishHeadResponse]) error {
	ctx := stream.Context()
	peer, err := applianceOf(ctx, s.ca, s.now())
	if err != nil {
		return err
	}
	u, err := s.receive(stream)
	if err != nil {
		return err
	}
	res, err := s.in.Publish(ctx, peer, u)
	if err != nil {
		return toStatus(err)
	}
	return stream.SendAndClose(&centralv1.PublishHeadResponse{EventCount: uint32(res.EventCount), Duplicate: res.Duplicate})
}

// receive reads the start message and the leaf chunks of a stream.
func (s *Ingest) receive(stream grpc.ClientStreamingServer[centralv1.PublishHeadRequest, centralv1.PublishHeadResponse]) (ingest.Upload, error) {
	first, err := stream.Recv()
	if err != nil {
		return ingest.Upload{}, recvErr(err)
	}
	start := first.GetStart()
	if start == nil {
		return ingest.Upload{}, status.Error(codes.InvalidArgument, "the first message of PublishHead must be start")
	}
	u := ingest.Upload{
		Head:              HeadFromProto(start.GetHead()),
		FirstLeafIndex:    uint64(start.GetFirstLeafIndex()),
		LeafRetentionDays: int(start.GetLeafRetentionDays()),
	}
	if n := u.Head.EventCount - min(u.FirstLeafIndex, u.Head.EventCount); n > uint64(s.maxLeaves) {
		return ingest.Upload{}, status.Errorf(codes.ResourceExhausted, "an upload holds at most %d leaves, this head needs %d", s.maxLeaves, n)
	}
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return u, nil
		}
		if err != nil {
			return ingest.Upload{}, recvErr(err)
		}
		chunk := msg.GetLeaves()
		if chunk == nil {
			return ingest.Upload{}, status.Error(codes.InvalidArgument, "only the first message of PublishHead may be start")
		}
		if len(u.Leaves)+len(chunk.GetLeaves()) > s.maxLeaves {
			return ingest.Upload{}, status.Errorf(codes.ResourceExhausted, "an upload holds at most %d leaves", s.maxLeaves)
		}
		for _, l := range chunk.GetLeaves() {
			u.Leaves = append(u.Leaves, LeafFromProto(l))
		}
	}
}

func recvErr(err error) error {
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
		map[string]string{MetaStoredEventCount: strconv.FormatUint(r.StoredEventCount, 10)})
}

// MetaStoredEventCount is the ErrorInfo metadata key of a refusal that
// holds the event_count central stores for the tree.
const MetaStoredEventCount = "stored_event_count"

// RefusalOf reads a PublishHead error on the appliance side: the refusal's
// reason and the stored event_count, if the error is a refusal.
func RefusalOf(err error) (reason string, stored uint64, ok bool) {
	st, isStatus := status.FromError(err)
	if !isStatus {
		return "", 0, false
	}
	info := apierr.Info(st)
	if info == nil {
		return "", 0, false
	}
	n, _ := strconv.ParseUint(info.GetMetadata()[MetaStoredEventCount], 10, 64)
	return info.GetReason(), n, true
}
