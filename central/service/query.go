// Package service implements the central plane's gRPC services:
// CentralAuditService (appliances publish heads, over mTLS) and
// AuditQueryService (tenants read heads and proofs, with audit tokens).
// Requests are validated by the grpcserver interceptor (protovalidate)
// before they arrive here; store and ingest errors are mapped to gRPC codes
// here, at the boundary.
package service

import (
	"context"
	"errors"
	"log/slog"

	"google.golang.org/grpc/codes"

	"github.com/tollgate-dev/tollgate/audit/ids"
	"github.com/tollgate-dev/tollgate/central/apierr"
	"github.com/tollgate-dev/tollgate/central/auth"
	"github.com/tollgate-dev/tollgate/central/store"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
)

// Query implements centralv1.AuditQueryServiceServer over a store. Install
// auth.Tokens.UnaryInterceptor on its server.
type Query struct {
	centralv1.UnimplementedAuditQueryServiceServer
	store  store.Store
	logger *slog.Logger
}

// NewQuery serves st; logger records internal errors (nil discards them).
func NewQuery(st store.Store, logger *slog.Logger) *Query {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Query{store: st, logger: logger}
}

// ListHeads returns the latest head of each appliance for a tenant's day.
func (q *Query) ListHeads(ctx context.Context, req *centralv1.ListHeadsRequest) (*centralv1.ListHeadsResponse, error) {
	if err := auth.Authorize(ctx, req.GetTenantId()); err != nil {
		return nil, err
	}
	if err := checkDay(req.GetDay()); err != nil {
		return nil, err
	}
	heads, err := q.store.LatestHeads(ctx, req.GetTenantId(), req.GetDay())
	if err != nil {
		return nil, q.internal(ctx, "ListHeads", err)
	}
	out := &centralv1.ListHeadsResponse{Data: make([]*centralv1.Head, 0, len(heads))}
	for _, h := range heads {
		m, err := HeadToProto(h)
		if err != nil {
			return nil, q.internal(ctx, "ListHeads", err)
		}
		out.Data = append(out.Data, m)
	}
	return out, nil
}

// GetProof returns the inclusion proof of one request's event.
func (q *Query) GetProof(ctx context.Context, req *centralv1.GetProofRequest) (*centralv1.GetProofResponse, error) {
	if err := auth.Authorize(ctx, req.GetTenantId()); err != nil {
		return nil, err
	}
	if err := checkDay(req.GetDay()); err != nil {
		return nil, err
	}
	id := store.TreeID{TenantID: req.GetTenantId(), ApplianceID: req.GetApplianceId(), Day: req.GetDay()}
	p, err := q.store.Proof(ctx, id, req.GetRequestId())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, apierr.New(codes.NotFound, apierr.ReasonRequestNotFound,
			"no event "+req.GetRequestId()+" in the tree of tenant "+req.GetTenantId()+" on "+req.GetApplianceId()+" for "+req.GetDay())
	case errors.Is(err, store.ErrPruned):
		return nil, apierr.New(codes.NotFound, apierr.ReasonProofExpired,
			"the leaves of "+id.String()+" are past retention; its heads remain")
	case err != nil:
		return nil, q.internal(ctx, "GetProof", err)
	}
	out, err := proofToProto(p)
	if err != nil {
		return nil, q.internal(ctx, "GetProof", err)
	}
	return out, nil
}

// checkDay refuses a day that matches the pattern but does not exist.
func checkDay(day string) error {
	if _, err := ids.ParseDay(day); err != nil {
		return apierr.New(codes.InvalidArgument, apierr.ReasonInvalidRequest, "day "+day+" is not a date (YYYY-MM-DD)")
	}
	return nil
}

func (q *Query) internal(ctx context.Context, method string, err error) error {
	q.logger.ErrorContext(ctx, "central query: "+method+" failed", "err", err)
	return apierr.New(codes.Internal, apierr.ReasonInternal, "reading the audit store failed")
}
