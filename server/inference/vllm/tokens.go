package vllm

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
)

// CountTokens implements inference.Engine with the server's /tokenize: the
// chat form, with the request's messages, tools and chat template
// arguments (templateKwargs), the generation prompt added and no special
// tokens, exactly as its chat completion renders the prompt, so the count
// is the completion's usage.prompt_tokens. The context length is the
// server's max_model_len.
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
	kwargs, err := templateKwargs(req.GetChatTemplateKwargsJson(), req.ReasoningEffort)
	if err != nil {
		return nil, err
	}
	b, err := marshal(tokenizeRequest{
		Model:               model,
		Messages:            messages(req.GetMessages()),
		Tools:               tools(req.GetTools()),
		ChatTemplateKwargs:  kwargs,
		AddGenerationPrompt: true,
		AddSpecialTokens:    false,
	})
	if err != nil {
		return nil, err
	}
	resp, err := e.post(ctx, "tokenize", e.base+"/tokenize", b, req.GetModel(), "")
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

// templateKwargs are the chat template's arguments of a completion with
// the client's chat_template_kwargs (JSON text; empty is none) and
// reasoning_effort (nil: not sent), for /tokenize, which takes no
// reasoning_effort of its own. They are what vLLM's chat completion makes
// of the two (ChatCompletionRequest.build_chat_params): the client's
// arguments with reasoning_effort over them, and, unless the client's
// arguments name enable_thinking, enable_thinking false for the effort
// "none" and true for the others (templates such as Gemma 4's think only
// when asked). Without an effort the client's text is sent as it is.
func templateKwargs(client string, effort *string) (jsontext.Value, error) {
	if effort == nil {
		return rawJSON(client), nil
	}
	kw := map[string]json.RawMessage{}
	if client != "" {
		if err := json.Unmarshal([]byte(client), &kw); err != nil || kw == nil {
			return nil, status.Error(codes.InvalidArgument, "vllm: chat_template_kwargs is not a JSON object")
		}
	}
	if _, set := kw["enable_thinking"]; !set {
		kw["enable_thinking"] = json.RawMessage(strconv.FormatBool(*effort != "none"))
	}
	kw["reasoning_effort"], _ = json.Marshal(*effort)
	b, err := json.Marshal(kw) // members in key order
	if err != nil {
		return nil, status.Errorf(codes.Internal, "vllm: chat_template_kwargs: %v", err)
	}
	return b, nil
}
