package service

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate-dev/tollgate/central/apierr"
	"github.com/tollgate-dev/tollgate/central/auth"
	"github.com/tollgate-dev/tollgate/central/centralclient"
	"github.com/tollgate-dev/tollgate/central/store"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
)

// MaxTreeHeadsPageSize is the largest page_size of ListTreeHeads, and
// the page without one: 1000 heads are some 17 MiB with the largest
// certificates, within DefaultMaxResponse.
const MaxTreeHeadsPageSize = 1000

// ListTreeHeads returns a tree's stored heads numbered from on, oldest
// first, a page at a time: next_from is set when more may follow. The
// page and one head more are read at once; a page that would pass the
// response limit is cut short, with next_from.
func (q *Query) ListTreeHeads(ctx context.Context, req *centralv1.ListTreeHeadsRequest) (*centralv1.ListTreeHeadsResponse, error) {
	if err := auth.Authorize(ctx, req.GetTenantId()); err != nil {
		return nil, err
	}
	if err := checkDay(req.GetDay()); err != nil {
		return nil, err
	}
	size := MaxTreeHeadsPageSize
	if req.PageSize != nil {
		size = int(req.GetPageSize())
	}
	id := store.TreeID{TenantID: req.GetTenantId(), ApplianceID: req.GetApplianceId(), Day: req.GetDay()}
	heads, err := q.store.HeadsFrom(ctx, id, int(req.GetFrom()), size+1)
	if err != nil {
		return nil, q.internal(ctx, "ListTreeHeads", err)
	}
	out := &centralv1.ListTreeHeadsResponse{Data: []*centralv1.Head{}}
	budget, used := q.maxResponse-maxTokenField, 0
	for i, h := range heads {
		next := req.GetFrom() + uint32(i)
		if i == size {
			out.NextFrom = proto.Uint32(next)
			break
		}
		m, err := centralclient.HeadToProto(h)
		if err != nil {
			return nil, q.internal(ctx, "ListTreeHeads", err)
		}
		n := itemSize(m)
		if used+n > budget {
			if i == 0 {
				return nil, q.internal(ctx, "ListTreeHeads", fmt.Errorf("head %d of %s alone is larger than a response may be (%d bytes)", next, id, n))
			}
			out.NextFrom = proto.Uint32(next)
			break
		}
		used += n
		out.Data = append(out.Data, m)
	}
	return out, nil
}

// GetConsistencyProof returns the consistency proof between two stored
// heads of a tree, with both heads.
func (q *Query) GetConsistencyProof(ctx context.Context, req *centralv1.GetConsistencyProofRequest) (*centralv1.GetConsistencyProofResponse, error) {
	if err := auth.Authorize(ctx, req.GetTenantId()); err != nil {
		return nil, err
	}
	if err := checkDay(req.GetDay()); err != nil {
		return nil, err
	}
	id := store.TreeID{TenantID: req.GetTenantId(), ApplianceID: req.GetApplianceId(), Day: req.GetDay()}
	to := store.LatestSize
	if req.ToSize != nil {
		to = uint64(req.GetToSize())
	}
	c, err := q.store.Consistency(ctx, id, uint64(req.GetFromSize()), to)
	if err != nil {
		return nil, q.consistencyError(ctx, id, req, err)
	}
	from, err := centralclient.HeadToProto(c.From)
	if err != nil {
		return nil, q.internal(ctx, "GetConsistencyProof", err)
	}
	toHead, err := centralclient.HeadToProto(c.To)
	if err != nil {
		return nil, q.internal(ctx, "GetConsistencyProof", err)
	}
	return &centralv1.GetConsistencyProofResponse{
		ApplianceId: id.ApplianceID, Day: id.Day, FromSize: from.GetEventCount(), ToSize: toHead.GetEventCount(),
		ConsistencyProof: store.HexHashes(c.Hashes), FromHead: from, ToHead: toHead,
	}, nil
}

// consistencyError is the status of a failed Store.Consistency.
func (q *Query) consistencyError(ctx context.Context, id store.TreeID, req *centralv1.GetConsistencyProofRequest, err error) error {
	var se *store.SizeError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return apierr.New(codes.NotFound, apierr.ReasonHeadNotFound, "no head of the tree "+id.String()+" is stored")
	case errors.As(err, &se):
		param := "to_size"
		if uint64(req.GetFromSize()) == se.Size {
			param = "from_size"
		}
		if se.Beyond() {
			return apierr.New(codes.OutOfRange, apierr.ReasonSizeOutOfRange,
				fmt.Sprintf("%s %d is above the size of the latest head of %s, %d events", param, se.Size, id, se.Latest))
		}
		return apierr.New(codes.NotFound, apierr.ReasonHeadNotFound,
			fmt.Sprintf("%s %d: no head of %d events of %s is stored (its heads are listed at /v1/tenants/%s/audit/history)",
				param, se.Size, se.Size, id, id.TenantID))
	case errors.Is(err, store.ErrPruned):
		return apierr.New(codes.NotFound, apierr.ReasonProofExpired,
			"the leaves of "+id.String()+" are past retention; its heads remain")
	}
	return q.internal(ctx, "GetConsistencyProof", err)
}
