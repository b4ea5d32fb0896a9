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
	// Leaf is the canonical leaf (RFC 8785 JSON: metadata and body hashes,
	// never a body), which hashes to LeafHash; at most MaxLeafBytes. Nil
	// for a leaf queued before leaves carried it.
	Leaf []byte
}

// MaxLeafBytes bounds a leaf's canonical bytes on the wire (the proto's
// bound). A leaf is some 600 to 900 bytes; one beyond the bound (which
// no well-formed request reaches) is sent with its hash alone.
const MaxLeafBytes = 16 << 10

// LeafOf is the upload leaf of an audit log leaf: its canonical bytes are
// dropped when they pass MaxLeafBytes.
func LeafOf(requestID string, sequence, leafIndex uint64, leafHash, canonical []byte) Leaf {
	if len(canonical) > MaxLeafBytes {
		canonical = nil
	}
	return Leaf{RequestID: requestID, Sequence: sequence, LeafIndex: leafIndex, LeafHash: leafHash, Leaf: canonical}
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
// up to 10,000; 4,096 leaves are some 3 MiB with their canonical bytes).
// A message also ends before its leaves' canonical bytes pass
// ChunkBytes, so that it stays within gRPC's 4 MiB however long the
// leaves.
const (
	ChunkSize  = 4096
	ChunkBytes = 3 << 20
)

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
	for rest := u.Leaves; len(rest) > 0; {
		n := chunkLen(rest)
		chunk := &centralv1.LeafChunk{Leaves: make([]*centralv1.Leaf, n)}
		for j, l := range rest[:n] {
			chunk.Leaves[j] = LeafToProto(l)
		}
		if err := send(stream, &centralv1.PublishHeadRequest{Part: &centralv1.PublishHeadRequest_Leaves{Leaves: chunk}}); err != nil {
			return nil, err
		}
		rest = rest[n:]
	}
	return stream.CloseAndRecv()
}

// chunkLen is how many of leaves the next message carries: at most
// ChunkSize, and at least one, but no more than keep their canonical bytes
// within ChunkBytes.
func chunkLen(leaves []Leaf) int {
	size := 0
	for i, l := range leaves {
		if i == ChunkSize {
			return i
		}
		if size += len(l.Leaf); i > 0 && size > ChunkBytes {
			return i
		}
	}
	return len(leaves)
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
