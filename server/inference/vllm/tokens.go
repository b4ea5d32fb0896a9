package vllm

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
)

// CountTokens implements inference.Engine with the server's /tokenize: the
// chat form, with the request's messages and tools, the generation prompt
// added and no special tokens, exactly as its chat completion renders the
// prompt, so the count is the completion's usage.prompt_tokens.
func (e *Engine) CountTokens(ctx context.Context, req *inferencev1.CountTokensRequest) (int64, error) {
	model, err := e.upstreamModel(req.GetModel(), inferencev1.ModelKind_MODEL_KIND_CHAT)
	if err != nil {
		return 0, err
	}
	n, err := e.countTokens(ctx, model, req)
	e.cfg.Metrics.observe(e.cfg.Namespace, "tokenize", err)
	return n, err
}

func (e *Engine) countTokens(ctx context.Context, model string, req *inferencev1.CountTokensRequest) (int64, error) {
	resp, err := e.post(ctx, "tokenize", "/tokenize", tokenizeRequest{
		Model:               model,
		Messages:            messages(req.GetMessages()),
		Tools:               tools(req.GetTools()),
		AddGenerationPrompt: true,
		AddSpecialTokens:    false,
	}, req.GetModel(), "")
	if err != nil {
		return 0, err
	}
	var out tokenizeResponse
	if err := decodeBody(resp, maxTokenizeBytes, &out); err != nil {
		return 0, err
	}
	if out.Count == nil || *out.Count < 0 {
		return 0, status.Error(codes.Internal, "vllm: /tokenize answered without a count")
	}
	return *out.Count, nil
}
