package pipeline

import (
	"context"
	"math"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/policy"
)

// DecideEmbeddings asks the policy about an embeddings request.
func (c *Call) DecideEmbeddings(ctx context.Context, req *inferencev1.EmbedRequest) error {
	_, err := c.decide(ctx, policy.Input{Request: policy.Request{Endpoint: policy.EndpointEmbeddings, Model: req.GetModel()}})
	return err
}

// ReserveEmbeddings admits an embeddings request, reserving an
// over-estimate of its tokens (embedReserve) against the key's TPD.
func (c *Call) ReserveEmbeddings(ctx context.Context, req *inferencev1.EmbedRequest) error {
	return c.Admit(ctx, c.embedReserve(req))
}

// Embed calls the engine. An answer holding a NaN or an infinity is
// refused as a broken engine answer (JSON has no such number, and no
// client could use one): internal, charged nothing. It sets the call's
// prompt usage.
func (c *Call) Embed(ctx context.Context, req *inferencev1.EmbedRequest) (*inferencev1.EmbedResponse, error) {
	req.RequestId = c.id
	resp, err := c.p.cfg.Inference.Embed(ctx, req, c.callOptions()...)
	if err == nil {
		err = finiteEmbeddings(resp)
	}
	if err != nil {
		return nil, c.engineError(ctx, "embed", err)
	}
	c.PromptTokens = resp.GetUsage().GetPromptTokens()
	return resp, nil
}

// finiteEmbeddings refuses an engine's answer holding a NaN or an
// infinity.
func finiteEmbeddings(resp *inferencev1.EmbedResponse) error {
	for i, e := range resp.GetEmbeddings() {
		for j, v := range e.GetValues() {
			if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
				return status.Errorf(codes.Internal, "engine returned a non-finite value (%v) at embedding %d, dimension %d", v, i, j)
			}
		}
	}
	return nil
}

// embedSpecialTokens is what an embeddings request reserves per input
// for the special tokens a model server adds to it: vLLM adds them by
// default (add_special_tokens), one or two on most models (BOS, EOS;
// [CLS] and [SEP] on BERT-style ones), so that an input of one byte
// counts three tokens. 16 leaves room for models that add more.
const embedSpecialTokens = 16

// embedReserve over-estimates an embeddings request's tokens for the TPD
// reservation: one per byte of text and one per token id (no tokenizer
// yields more tokens than bytes), plus embedSpecialTokens per input. The
// real count is settled afterwards.
func (c *Call) embedReserve(req *inferencev1.EmbedRequest) int64 {
	if c.principal.TPD <= 0 {
		return 0
	}
	var n int64
	for _, in := range req.GetInputs() {
		n += int64(len(in.GetText())+len(in.GetTokens().GetIds())) + embedSpecialTokens
	}
	return n
}
