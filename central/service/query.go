// Package service implements the central plane's gRPC services:
// CentralAuditService (appliances publish heads, over mTLS) and
// AuditQueryService (tenants read heads and proofs, with audit tokens).
// Requests are validated by the grpcserver interceptor (protovalidate)
// before they arrive here; store and ingest errors are mapped to gRPC codes
// here, at the boundary.
package service

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate-dev/tollgate/central/apierr"
	"github.com/tollgate-dev/tollgate/central/auth"
	"github.com/tollgate-dev/tollgate/central/centralclient"
	"github.com/tollgate-dev/tollgate/central/store"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// MaxPageSize is the largest page_size of ListHeads: 1000 heads of at
// most some 17 KiB each (a 16 KiB certificate) are some 17 MiB, well
// within DefaultMaxResponse.
const MaxPageSize = 1000

// DefaultMaxResponse bounds the encoded size of a ListHeads response: the
// REST gateway's connection receives at most central.MaxQueryResponse, and
// a larger message would fail there as an internal error. A list without
// page_size that would pass it is refused (page_size_required); a page
// that would is cut short, with a next_page_token.
const DefaultMaxResponse = 64 << 20

// listChunk is how many heads a list without page_size reads from the
// store at a time, so that one that does not fit a response is refused
// once it passes the limit, not after the whole day is read.
const listChunk = 1000

// maxTokenField bounds the encoded next_page_token field (an appliance
// id of at most 68 bytes in base64url, its tag and length).
const maxTokenField = 128

// Query implements centralv1.AuditQueryServiceServer over a store. Install
// auth.Tokens.UnaryInterceptor on its server.
type Query struct {
	centralv1.UnimplementedAuditQueryServiceServer
	store       store.Store
	logger      *slog.Logger
	maxResponse int
}

// QueryOption configures a Query.
type QueryOption func(*Query)

// WithMaxResponse bounds the encoded size of a ListHeads response (default
// DefaultMaxResponse); at most the receive limit of the gateway's
// connection.
func WithMaxResponse(n int) QueryOption {
	return func(q *Query) { q.maxResponse = n }
}

// NewQuery serves st; logger records internal errors (nil discards them).
func NewQuery(st store.Store, logger *slog.Logger, opts ...QueryOption) *Query {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	q := &Query{store: st, logger: logger, maxResponse: DefaultMaxResponse}
	for _, o := range opts {
		o(q)
	}
	return q
}

// ListHeads returns the latest head of each appliance for a tenant's day,
// by appliance id: with page_size, the page after page_token; without,
// every head, or page_size_required when they do not fit one response.
func (q *Query) ListHeads(ctx context.Context, req *centralv1.ListHeadsRequest) (*centralv1.ListHeadsResponse, error) {
	if err := auth.Authorize(ctx, req.GetTenantId()); err != nil {
		return nil, err
	}
	if err := checkDay(req.GetDay()); err != nil {
		return nil, err
	}
	after, err := parsePageToken(req.GetPageToken())
	if err != nil {
		return nil, err
	}
	paged := req.PageSize != nil
	chunk, budget := listChunk, q.maxResponse
	if paged {
		// One more than the page, to know whether another follows.
		chunk, budget = int(req.GetPageSize())+1, q.maxResponse-maxTokenField
	}
	out := &centralv1.ListHeadsResponse{Data: []*centralv1.Head{}}
	size := 0
	for {
		heads, err := q.store.LatestHeads(ctx, req.GetTenantId(), req.GetDay(), after, chunk)
		if err != nil {
			return nil, q.internal(ctx, "ListHeads", err)
		}
		for _, h := range heads {
			if paged && len(out.Data) == int(req.GetPageSize()) {
				out.NextPageToken = proto.String(pageToken(after))
				return out, nil
			}
			m, err := centralclient.HeadToProto(h)
			if err != nil {
				return nil, q.internal(ctx, "ListHeads", err)
			}
			n := itemSize(m)
			if size+n > budget {
				switch {
				case !paged:
					return nil, apierr.New(codes.InvalidArgument, apierr.ReasonPageSizeRequired,
						fmt.Sprintf("the heads of tenant %s on %s do not fit in one response (%d MiB at most): "+
							"list them in pages, with page_size (1 to %d) and page_token", req.GetTenantId(), req.GetDay(), q.maxResponse>>20, MaxPageSize))
				case len(out.Data) == 0:
					return nil, q.internal(ctx, "ListHeads", fmt.Errorf("head %s alone is larger than a response may be (%d bytes)", store.TreeOf(h), n))
				}
				// A page is cut short rather than refused: the client
				// reads on with next_page_token.
				out.NextPageToken = proto.String(pageToken(after))
				return out, nil
			}
			size += n
			out.Data = append(out.Data, m)
			after = h.ApplianceID
		}
		if len(heads) < chunk {
			return out, nil
		}
	}
}

// itemSize is what m adds to the encoded response of a list as an
// element of its data (field 1): its field tag, length and message.
func itemSize(m proto.Message) int {
	return protowire.SizeTag(1) + protowire.SizeBytes(proto.Size(m))
}

// pageToken is the next_page_token of a page whose last head is
// appliance's: base64url of the appliance id, without padding. Clients
// treat it as opaque.
func pageToken(appliance string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(appliance))
}

// parsePageToken returns the appliance id a page_token continues after
// ("" for none). Protovalidate checked its alphabet; a token that does not
// decode to an appliance id was not handed out by ListHeads.
func parsePageToken(tok string) (string, error) {
	if tok == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(tok)
	if err != nil || ids.CheckAppliance(string(b)) != nil {
		return "", apierr.New(codes.InvalidArgument, apierr.ReasonInvalidRequest,
			"page_token must be the next_page_token of a previous page, unchanged")
	}
	return string(b), nil
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
