// Package centralclient is how an appliance speaks to the central plane's
// CentralAuditService: the keepalive of its connection, the PublishHead
// RPC (a signed head and the leaves it adds, streamed in chunks) and the
// refusals that RPC answers with. The central plane's own packages use its
// wire forms and refusal reasons too, so that both ends share one
// definition; it depends on none of them.
package centralclient

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc/keepalive"

	"github.com/tollgate-dev/tollgate/audit/head"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
)

// Keepalive is how a connection to the central plane finds a dead link:
// it pings the plane once the connection has been silent for a minute,
// with or without an upload in progress, and closes the connection when
// the ping goes unanswered for 20 s, failing the upload on it (retried
// with backoff on a new connection) instead of waiting for the operating
// system's TCP keepalive, some two hours. The central plane accepts pings
// every 30 s or more (its keepalive enforcement policy), and pings a
// silent connection after a minute itself; a client that pinged more
// often would be sent GOAWAY (too_many_pings).
var Keepalive = keepalive.ClientParameters{Time: time.Minute, Timeout: 20 * time.Second, PermitWithoutStream: true}

// Leaf is one leaf of an upload: enough for the central plane to check it
// against the head and to prove the leaf's inclusion later.
type Leaf struct {
	RequestID string
	Sequence  uint64
	LeafIndex uint64
	// LeafHash is the RFC 6962 leaf hash (32 bytes).
	LeafHash []byte
}

// Upload is one published head and the leaves that follow it: leaves
// [FirstLeafIndex, Head.EventCount) of its tree, in order.
type Upload struct {
	Head              head.Head
	FirstLeafIndex    uint64
	Leaves            []Leaf
	LeafRetentionDays int
}

// ChunkSize is how many leaves Publish sends per message (the proto allows
// up to 10,000; 4,096 leaves are some 350 KiB).
const ChunkSize = 4096

// Publish sends an upload over a PublishHead stream: the start message,
// then the leaves in chunks. A refusal is read with RefusalOf.
func Publish(ctx context.Context, c centralv1.CentralAuditServiceClient, u Upload) (*centralv1.PublishHeadResponse, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h, err := HeadToProto(u.Head)
	if err != nil {
		return nil, err
	}
	stream, err := c.PublishHead(ctx)
	if err != nil {
		return nil, err
	}
	start := &centralv1.PublishHeadRequest{Part: &centralv1.PublishHeadRequest_Start{Start: &centralv1.PublishStart{
		Head: h, FirstLeafIndex: uint32(u.FirstLeafIndex), LeafRetentionDays: uint32(u.LeafRetentionDays),
	}}}
	if err := send(stream, start); err != nil {
		return nil, err
	}
	for i := 0; i < len(u.Leaves); i += ChunkSize {
		part := u.Leaves[i:min(i+ChunkSize, len(u.Leaves))]
		chunk := &centralv1.LeafChunk{Leaves: make([]*centralv1.Leaf, len(part))}
		for j, l := range part {
			chunk.Leaves[j] = LeafToProto(l)
		}
		if err := send(stream, &centralv1.PublishHeadRequest{Part: &centralv1.PublishHeadRequest_Leaves{Leaves: chunk}}); err != nil {
			return nil, err
		}
	}
	return stream.CloseAndRecv()
}

// send sends one message; when the server has already ended the stream
// (Send returns io.EOF), the status comes from CloseAndRecv.
func send(stream centralv1.CentralAuditService_PublishHeadClient, m *centralv1.PublishHeadRequest) error {
	err := stream.Send(m)
	if errors.Is(err, io.EOF) {
		if _, serr := stream.CloseAndRecv(); serr != nil {
			return serr
		}
	}
	return err
}
