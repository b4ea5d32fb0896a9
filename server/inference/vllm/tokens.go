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
// prompt, so the count is the completion's usage.prompt_tokens. The
// context length is the server's max_model_len.
func (e *Engine) CountTokens(ctx context.Context, req *inferencev1.CountTokensRequest) (*inferencev1.CountTokensResponse, error) {
	model, err := e.upstreamModel(req.GetModel(), inferencev1.ModelKind_MODEL_KIND_CHAT)
	if err != nil {
		return nil, err
	}
	out, err := e.countTokens(ctx, model, req)
	e.cfg.Metrics.observe(e.cfg.Namespace, "tokenize", err)
	return out, err
}

func (e *Engine) countTokens(ctx context.Context, model string, req *inferencev1.CountTokensRequest) (*inferencev1.CountTokensResponse, error) {
	resp, err := e.post(ctx, "tokenize", "/tokenize", tokenizeRequest{
		Model:               model,
		Messages:            messages(req.GetMessages()),
		Tools:               tools(req.GetTools()),
		ChatTemplateKwargs:  rawJSON(req.GetChatTemplateKwargsJson()),
		AddGenerationPrompt: true,
		AddSpecialTokens:    false,
	}, req.GetModel(), "")
	if err != nil {
		return nil, err
	}
	var out tokenizeResponse
	if err := decodeBody(resp, maxTokenizeBytes, &out); err != nil {
		return nil, err
	}
	if out.Count == nil || *out.Count < 0 {
		return nil, status.Error(codes.Internal, "vllm: /tokenize answered without a count")
	}
	return &inferencev1.CountTokensResponse{PromptTokens: *out.Count, ContextLength: max(out.MaxModelLen, 0)}, nil
}
