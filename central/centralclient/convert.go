package centralclient

import (
	"fmt"
	"math"

	"github.com/tollgate-dev/tollgate/audit/head"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
)

// HeadToProto converts a head to its message. Counts are 32-bit on the
// wire (so REST carries JSON numbers); a head beyond that was never
// accepted.
func HeadToProto(h head.Head) (*centralv1.Head, error) {
	if h.EventCount > math.MaxUint32 || h.LastSequence > math.MaxUint32 {
		return nil, fmt.Errorf("head %s/%s/%s has counts beyond 32 bits", h.TenantID, h.ApplianceID, h.Day)
	}
	return &centralv1.Head{
		TenantId: h.TenantID, ApplianceId: h.ApplianceID, Day: h.Day,
		EventCount: uint32(h.EventCount), LastSequence: uint32(h.LastSequence), MerkleRoot: h.MerkleRoot,
		Signature: h.Signature, SignedAt: h.SignedAt, Certificate: h.Certificate,
	}, nil
}

// LeafToProto converts a leaf to its message.
func LeafToProto(l Leaf) *centralv1.Leaf {
	return &centralv1.Leaf{RequestId: l.RequestID, Sequence: uint32(l.Sequence), LeafIndex: uint32(l.LeafIndex), LeafHash: l.LeafHash, Leaf: l.Leaf}
}
