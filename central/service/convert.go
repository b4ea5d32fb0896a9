package service

import (
	"encoding/hex"
	"fmt"
	"math"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/store"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
)

// HeadToProto converts a head to its message. Counts are 32-bit on the
// wire (so REST carries JSON numbers); a head beyond that was never
// accepted.
func HeadToProto(h head.Head) (*centralv1.Head, error) {
	if h.EventCount > math.MaxUint32 || h.LastSequence > math.MaxUint32 {
		return nil, fmt.Errorf("head %s has counts beyond 32 bits", store.TreeOf(h))
	}
	return &centralv1.Head{
		TenantId: h.TenantID, ApplianceId: h.ApplianceID, Day: h.Day,
		EventCount: uint32(h.EventCount), LastSequence: uint32(h.LastSequence), MerkleRoot: h.MerkleRoot,
		Signature: h.Signature, SignedAt: h.SignedAt, Certificate: h.Certificate,
	}, nil
}

// HeadFromProto converts a head message back.
func HeadFromProto(m *centralv1.Head) head.Head {
	return head.Head{
		TenantID: m.GetTenantId(), ApplianceID: m.GetApplianceId(), Day: m.GetDay(),
		EventCount: uint64(m.GetEventCount()), LastSequence: uint64(m.GetLastSequence()), MerkleRoot: m.GetMerkleRoot(),
		Signature: m.GetSignature(), SignedAt: m.GetSignedAt(), Certificate: m.GetCertificate(),
	}
}

// LeafToProto converts a leaf to its message.
func LeafToProto(l store.Leaf) *centralv1.Leaf {
	return &centralv1.Leaf{RequestId: l.RequestID, Sequence: uint32(l.Sequence), LeafIndex: uint32(l.LeafIndex), LeafHash: l.LeafHash}
}

// LeafFromProto converts a leaf message back.
func LeafFromProto(m *centralv1.Leaf) store.Leaf {
	return store.Leaf{RequestID: m.GetRequestId(), Sequence: uint64(m.GetSequence()), LeafIndex: uint64(m.GetLeafIndex()), LeafHash: m.GetLeafHash()}
}

// proofToProto converts stored proof material to the REST proof object.
func proofToProto(p store.Proof) (*centralv1.GetProofResponse, error) {
	h, err := HeadToProto(p.Head)
	if err != nil {
		return nil, err
	}
	return &centralv1.GetProofResponse{
		ApplianceId: p.Head.ApplianceID, Day: p.Head.Day, RequestId: p.Leaf.RequestID,
		Sequence: uint32(p.Leaf.Sequence), LeafIndex: uint32(p.Leaf.LeafIndex), TreeSize: h.GetEventCount(),
		LeafHash: hex.EncodeToString(p.Leaf.LeafHash), AuditPath: store.HexHashes(p.Hashes), Head: h,
	}, nil
}
