// Package service implements the AuditService gRPC API over an audit log.
// Requests are validated by the grpcserver interceptor (protovalidate)
// before they arrive here.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	auditv1 "github.com/tollgate-dev/tollgate/gen/tollgate/audit/v1"
)

// Service implements auditv1.AuditServiceServer.
type Service struct {
	auditv1.UnimplementedAuditServiceServer
	log    *auditlog.Log
	logger *slog.Logger
}

// New serves l; logger records internal errors (nil discards them).
func New(l *auditlog.Log, logger *slog.Logger) *Service {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Service{log: l, logger: logger}
}

// Register registers a Service over l on s.
func Register(s grpc.ServiceRegistrar, l *auditlog.Log, logger *slog.Logger) {
	auditv1.RegisterAuditServiceServer(s, New(l, logger))
}

// GetEvent returns an event of the tenant with its bodies.
func (s *Service) GetEvent(ctx context.Context, req *auditv1.GetEventRequest) (*auditv1.GetEventResponse, error) {
	// The log checks the tenant before it reads the bodies.
	rec, err := s.log.TenantEvent(req.GetTenantId(), req.GetRequestId())
	if errors.Is(err, auditlog.ErrNotFound) {
		// Another tenant's event is indistinguishable from none: one
		// message, made of the request alone.
		return nil, status.Errorf(codes.NotFound, "no event %s for tenant %s", req.GetRequestId(), req.GetTenantId())
	}
	if err != nil {
		return nil, s.status(ctx, "GetEvent", err)
	}
	return &auditv1.GetEventResponse{Event: eventToProto(rec)}, nil
}

// GetHead returns the latest signed head of a tenant's tree of a day.
func (s *Service) GetHead(ctx context.Context, req *auditv1.GetHeadRequest) (*auditv1.GetHeadResponse, error) {
	h, err := s.log.Head(req.GetTenantId(), req.GetDay())
	if err != nil {
		return nil, s.status(ctx, "GetHead", err)
	}
	return &auditv1.GetHeadResponse{Head: HeadToProto(h)}, nil
}

// MaxHeadsPage bounds the heads of one ListHeads response (page_size's
// default and maximum): at ~900 bytes a head (its certificate included),
// a page stays well inside gRPC's default 4 MiB receive limit however
// often heads are signed.
const MaxHeadsPage = 1000

// ListHeads returns the signed heads of a tenant's tree of a day, oldest
// first, a page at a time (from, page_size, next_from).
func (s *Service) ListHeads(ctx context.Context, req *auditv1.ListHeadsRequest) (*auditv1.ListHeadsResponse, error) {
	size := int(req.GetPageSize())
	if size == 0 || size > MaxHeadsPage {
		size = MaxHeadsPage
	}
	heads, next, err := s.log.HeadsPage(req.GetTenantId(), req.GetDay(), req.GetFrom(), size)
	if err != nil {
		return nil, s.status(ctx, "ListHeads", err)
	}
	out := &auditv1.ListHeadsResponse{Heads: make([]*auditv1.Head, 0, len(heads)), NextFrom: next}
	for _, h := range heads {
		out.Heads = append(out.Heads, HeadToProto(h))
	}
	return out, nil
}

// GetInclusionProof proves an event's inclusion in a signed head.
func (s *Service) GetInclusionProof(ctx context.Context, req *auditv1.GetInclusionProofRequest) (*auditv1.GetInclusionProofResponse, error) {
	p, err := s.log.InclusionProof(req.GetTenantId(), req.GetDay(), req.GetRequestId(), req.GetTreeSize())
	if errors.Is(err, auditlog.ErrNotFound) {
		// One message, made of the request alone, whatever is missing:
		// another tenant's event is indistinguishable from none.
		msg := fmt.Sprintf("no proof of event %s in the tree of tenant %s on %s", req.GetRequestId(), req.GetTenantId(), req.GetDay())
		if req.GetTreeSize() > 0 {
			msg += fmt.Sprintf(" at tree_size %d", req.GetTreeSize())
		}
		return nil, status.Error(codes.NotFound, msg)
	}
	if err != nil {
		return nil, s.status(ctx, "GetInclusionProof", err)
	}
	return &auditv1.GetInclusionProofResponse{
		Head: HeadToProto(p.Head), LeafIndex: p.LeafIndex, Leaf: p.Leaf, LeafHash: p.LeafHash, Hashes: p.Hashes,
	}, nil
}

// GetConsistencyProof proves that a tree at to_size extends it at from_size.
func (s *Service) GetConsistencyProof(ctx context.Context, req *auditv1.GetConsistencyProofRequest) (*auditv1.GetConsistencyProofResponse, error) {
	hashes, err := s.log.ConsistencyProof(req.GetTenantId(), req.GetDay(), req.GetFromSize(), req.GetToSize())
	if err != nil {
		return nil, s.status(ctx, "GetConsistencyProof", err)
	}
	return &auditv1.GetConsistencyProofResponse{Hashes: hashes}, nil
}

// status maps a log error to a gRPC status, logging unexpected ones.
func (s *Service) status(ctx context.Context, method string, err error) error {
	switch {
	case errors.Is(err, auditlog.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, auditlog.ErrNotCovered):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, auditlog.ErrInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	}
	s.logger.ErrorContext(ctx, "audit service: "+method+" failed", "err", err)
	return status.Error(codes.Internal, "audit log read failed")
}
