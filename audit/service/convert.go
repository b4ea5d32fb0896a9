package service

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate-dev/tollgate/audit/head"
	"github.com/tollgate-dev/tollgate/audit/leaf"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	auditv1 "github.com/tollgate-dev/tollgate/gen/tollgate/audit/v1"
)

// HeadToProto converts a head to its message.
func HeadToProto(h head.Head) *auditv1.Head {
	return &auditv1.Head{
		TenantId: h.TenantID, ApplianceId: h.ApplianceID, Day: h.Day,
		EventCount: h.EventCount, LastSequence: h.LastSequence, MerkleRoot: h.MerkleRoot,
		Signature: h.Signature, SignedAt: h.SignedAt, Certificate: h.Certificate,
	}
}

// HeadFromProto converts a head message back, for verification.
func HeadFromProto(m *auditv1.Head) head.Head {
	return head.Head{
		TenantID: m.GetTenantId(), ApplianceID: m.GetApplianceId(), Day: m.GetDay(),
		EventCount: m.GetEventCount(), LastSequence: m.GetLastSequence(), MerkleRoot: m.GetMerkleRoot(),
		Signature: m.GetSignature(), SignedAt: m.GetSignedAt(), Certificate: m.GetCertificate(),
	}
}

func eventToProto(r auditlog.Record) *auditv1.Event {
	l := r.Leaf
	var at *timestamppb.Timestamp
	if t, err := leaf.ParseTime(l.Time); err == nil {
		at = timestamppb.New(t.In(time.UTC))
	}
	return &auditv1.Event{
		RequestId: l.RequestID, Sequence: l.Sequence, TenantId: l.TenantID, ApplianceId: l.ApplianceID,
		KeyId: l.KeyID, Time: at, Endpoint: l.Endpoint, Model: l.Model, Status: int32(l.Status),
		PromptTokens: l.PromptTokens, CompletionTokens: l.CompletionTokens, PolicyDecisionId: l.PolicyDecisionID,
		RequestSha256: l.RequestSHA256, ResponseSha256: l.ResponseSHA256, Salt: l.Salt,
		Day: r.Day, LeafIndex: r.LeafIndex, Leaf: r.LeafBytes, LeafHash: r.LeafHash,
		RequestBody: r.RequestBody, ResponseBody: r.ResponseBody,
		BodiesPruned: r.BodiesPruned, BodiesLost: r.BodiesLost,
	}
}
