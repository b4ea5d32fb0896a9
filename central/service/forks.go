package service

import (
	"context"
	"fmt"
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/auth"
	"github.com/tollgate-dev/tollgate/central/centralclient"
	"github.com/tollgate-dev/tollgate/central/store"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
)

// MaxForksPageSize is the largest page_size of ListForks, and the page
// without one: a fork holds two heads and a consistency proof (at most
// 64 hashes), at most some 40 KiB with 16 KiB certificates, so 1000 of
// them are some 40 MiB, within
// DefaultMaxResponse.
const MaxForksPageSize = 1000

// forksChunk is how many forks ListForks reads from the store at a time
// (fewer when the page is smaller), so that a page cut short by the
// response limit costs what it holds, not a whole page of forks with
// their certificates (some 40 MiB).
const forksChunk = 100

// ListForks returns the tenant's forks numbered from on, of the appliance
// and day when given, by number, a page at a time: next_from is set when
// more may follow. The forks are read forksChunk at a time, as ListHeads
// reads heads; a page that would pass the response limit is cut short,
// with next_from, once the limit is reached.
func (q *Query) ListForks(ctx context.Context, req *centralv1.ListForksRequest) (*centralv1.ListForksResponse, error) {
	if err := auth.Authorize(ctx, req.GetTenantId()); err != nil {
		return nil, err
	}
	if req.GetDay() != "" {
		if err := checkDay(req.GetDay()); err != nil {
			return nil, err
		}
	}
	size := MaxForksPageSize
	if req.PageSize != nil {
		size = int(req.GetPageSize())
	}
	// One more than the page in all, to know whether another follows.
	chunk := min(size+1, forksChunk)
	fq := store.ForkQuery{ApplianceID: req.GetApplianceId(), Day: req.GetDay(), From: uint64(req.GetFrom()), Limit: chunk}
	out := &centralv1.ListForksResponse{Data: []*centralv1.Fork{}}
	budget, used := q.maxResponse-maxTokenField, 0
	for {
		forks, err := q.store.Forks(ctx, req.GetTenantId(), fq)
		if err != nil {
			return nil, q.internal(ctx, "ListForks", err)
		}
		for _, f := range forks {
			if len(out.Data) == size {
				out.NextFrom = proto.Uint32(uint32(f.Number))
				return out, nil
			}
			m, err := forkToProto(f)
			if err != nil {
				return nil, q.internal(ctx, "ListForks", err)
			}
			n := itemSize(m)
			if used+n > budget {
				if len(out.Data) == 0 {
					return nil, q.internal(ctx, "ListForks", fmt.Errorf("fork %d of %s alone is larger than a response may be (%d bytes)", f.Number, req.GetTenantId(), n))
				}
				out.NextFrom = proto.Uint32(uint32(f.Number))
				return out, nil
			}
			used += n
			out.Data = append(out.Data, m)
			fq.From = f.Number + 1
		}
		if len(forks) < chunk {
			return out, nil
		}
	}
}

// forkToProto converts a stored fork to its message.
func forkToProto(f store.Fork) (*centralv1.Fork, error) {
	if f.Number > math.MaxUint32 {
		return nil, fmt.Errorf("fork number %d beyond 32 bits", f.Number)
	}
	signed, err := centralclient.HeadToProto(f.Head)
	if err != nil {
		return nil, err
	}
	stored, err := centralclient.HeadToProto(f.Stored)
	if err != nil {
		return nil, err
	}
	return &centralv1.Fork{
		Number: uint32(f.Number), TenantId: f.Head.TenantID, ApplianceId: f.Head.ApplianceID, Day: f.Head.Day,
		ReceivedAt: head.FormatSignedAt(f.ReceivedAt), SignedHead: signed, StoredHead: stored,
		StoredRoot: f.StoredRoot, StoredRootFromNodes: f.FromNodes, ConsistencyProof: store.HexHashes(f.ConsistencyProof),
	}, nil
}
