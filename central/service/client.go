package service

import (
	"context"
	"errors"
	"io"

	"github.com/tollgate-dev/tollgate/central/ingest"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
)

// ChunkSize is how many leaves Publish sends per message (the proto allows
// up to 10,000; 4,096 leaves are some 350 KiB).
const ChunkSize = 4096

// Publish sends an upload over a PublishHead stream: the start message,
// then the leaves in chunks.
func Publish(ctx context.Context, c centralv1.CentralAuditServiceClient, u ingest.Upload) (*centralv1.PublishHeadResponse, error) {
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
