package pipeline

import (
	"context"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/policy"
)

// DecideModels asks the policy about a model listing (Model empty) or the
// lookup of the model Model, as every request is asked.
func (c *Call) DecideModels(ctx context.Context) error {
	_, err := c.decide(ctx, policy.Input{Request: policy.Request{Endpoint: policy.EndpointModels, Model: c.Model}})
	return err
}

// Models lists the loaded models (sorted by id by the service) that the
// call's key allows.
func (c *Call) Models(ctx context.Context) ([]*inferencev1.Model, error) {
	resp, err := c.p.cfg.Inference.ListModels(ctx, &inferencev1.ListModelsRequest{})
	if err != nil {
		return nil, c.engineError(ctx, "list models", err)
	}
	var out []*inferencev1.Model
	for _, m := range resp.GetModels() {
		if c.principal.AllowsModel(m.GetId()) {
			out = append(out, m)
		}
	}
	return out, nil
}

// LookupModel serves the lookup of one model, id: a model the key may not
// use is KindNotFound before the policy is asked, as OpenAI answers for
// models an account cannot see, so that a key cannot probe what else is
// loaded (a 403 would tell it that the model exists). The policy decides
// on the others, with the id as request.model, and the call is admitted
// against the key's RPM; a model no engine lists is KindNotFound too.
func (c *Call) LookupModel(ctx context.Context, id string) (*inferencev1.Model, error) {
	notHere := NotFound("model %q does not exist or this key may not use it", id)
	c.Model = id
	if !c.principal.AllowsModel(id) {
		return nil, notHere
	}
	if err := c.DecideModels(ctx); err != nil {
		return nil, err
	}
	if err := c.Admit(ctx, 0); err != nil {
		return nil, err
	}
	models, err := c.Models(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range models {
		if m.GetId() == id {
			return m, nil
		}
	}
	return nil, notHere
}
