package service

import (
	"encoding/hex"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/central/centralclient"
	"github.com/tollgate-dev/tollgate/central/store"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
)

// HeadFromProto converts a head message back.
func HeadFromProto(m *centralv1.Head) head.Head {
	return head.Head{
		TenantID: m.GetTenantId(), ApplianceID: m.GetApplianceId(), Day: m.GetDay(),
		EventCount: uint64(m.GetEventCount()), LastSequence: uint64(m.GetLastSequence()), MerkleRoot: m.GetMerkleRoot(),
		Signature: m.GetSignature(), SignedAt: m.GetSignedAt(), Certificate: m.GetCertificate(),
	}
}

// LeafFromProto converts a leaf message back.
func LeafFromProto(m *centralv1.Leaf) store.Leaf {
	return store.Leaf{RequestID: m.GetRequestId(), Sequence: uint64(m.GetSequence()), LeafIndex: uint64(m.GetLeafIndex()), LeafHash: m.GetLeafHash(), Leaf: m.GetLeaf()}
}

// proofToProto converts stored proof material to the REST proof object.
func proofToProto(p store.Proof) (*centralv1.GetProofResponse, error) {
	h, err := centralclient.HeadToProto(p.Head)
	if err != nil {
		return nil, err
	}
	return &centralv1.GetProofResponse{
		ApplianceId: p.Head.ApplianceID, Day: p.Head.Day, RequestId: p.Leaf.RequestID,
		Sequence: uint32(p.Leaf.Sequence), LeafIndex: uint32(p.Leaf.LeafIndex), TreeSize: h.GetEventCount(),
		LeafHash: hex.EncodeToString(p.Leaf.LeafHash), AuditPath: store.HexHashes(p.Hashes), Head: h,
		Leaf: string(p.Leaf.Leaf),
	}, nil
}
