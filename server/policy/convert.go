package policy

import (
	"time"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	policyv1 "github.com/tollgate-dev/tollgate/gen/tollgate/policy/v1"
	"github.com/tollgate-dev/tollgate/server/keys"
)

var endpointFromProto = map[policyv1.Endpoint]Endpoint{
	policyv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS: EndpointChatCompletions,
	policyv1.Endpoint_ENDPOINT_EMBEDDINGS:       EndpointEmbeddings,
	policyv1.Endpoint_ENDPOINT_MODELS:           EndpointModels,
	policyv1.Endpoint_ENDPOINT_COMPLETIONS:      EndpointCompletions,
}

var toolChoiceFromProto = map[inferencev1.ToolChoiceMode]ToolChoiceMode{
	inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_UNSPECIFIED: ToolChoiceUnspecified,
	inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_NONE:        ToolChoiceNone,
	inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_AUTO:        ToolChoiceAuto,
	inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED:    ToolChoiceRequired,
	inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_FUNCTION:    ToolChoiceFunction,
}

var deniedByToProto = map[DeniedBy]policyv1.DeniedBy{
	DeniedByNone:       policyv1.DeniedBy_DENIED_BY_UNSPECIFIED,
	DeniedByModel:      policyv1.DeniedBy_DENIED_BY_MODEL,
	DeniedByToolScope:  policyv1.DeniedBy_DENIED_BY_TOOL_SCOPE,
	DeniedByToolChoice: policyv1.DeniedBy_DENIED_BY_TOOL_CHOICE,
	DeniedByBundle:     policyv1.DeniedBy_DENIED_BY_BUNDLE,
}

// InputFromProto converts a validated DecideRequest to an Input. An unset
// time is left zero (Decide then uses the current time).
func InputFromProto(req *policyv1.DecideRequest) Input {
	k, r := req.GetKey(), req.GetRequest()
	in := Input{
		Key: keys.NewPrincipal(k.GetTenantId(), k.GetKeyId(), k.GetLabel(), k.GetAllModels(),
			k.GetModels(), 0, 0, k.GetScopes(), time.Time{}),
		ApplianceID: req.GetApplianceId(),
		keyOnce:     true,
		Request: Request{
			ID:       r.GetRequestId(),
			Endpoint: endpointFromProto[r.GetEndpoint()],
			Model:    r.GetModel(),
			Stream:   r.GetStream(),
			Tools:    r.GetTools(),
			ToolChoice: ToolChoice{
				Mode: toolChoiceFromProto[r.GetToolChoice().GetMode()],
				Name: r.GetToolChoice().GetFunctionName(),
			},
			MessageCount:    int(r.GetMessageCount()),
			Temperature:     r.Temperature,
			MaxTokens:       r.MaxTokens,
			ReasoningEffort: r.ReasoningEffort,
		},
	}
	if req.GetTime() != nil {
		in.Time = req.GetTime().AsTime()
	}
	return in
}

// DecisionToProto converts a decision for the wire.
func DecisionToProto(d *Decision) *policyv1.Decision {
	return &policyv1.Decision{
		Id:             d.ID,
		Allow:          d.Allow,
		Reason:         d.Reason,
		DeniedBy:       deniedByToProto[d.DeniedBy],
		AllowedTools:   d.AllowedTools,
		DeniedTools:    d.DeniedTools,
		BundleRevision: d.BundleRevision,
		BundleDigest:   d.BundleDigest,
		Narrowed:       d.Narrowed,
	}
}
