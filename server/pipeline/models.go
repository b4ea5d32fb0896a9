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
