package vllm

import (
	"encoding/json"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tollgate-dev/tollgate/internal/openai"
)

// The server's JSON, as far as the engine reads or writes it: OpenAI's
// messages are internal/openai's; vLLM's own /tokenize and its error bodies
// are here. Requests are written with encoding/json; answers are read with
// github.com/go-json-experiment/json (the edge's decoder), the faster of
// the two on a completion's chunks (docs/engines.md, "Performance"). Fields
// the engine has no use for (vLLM adds many: logprobs, token_ids,
// kv_transfer_params…) are not in the structs: decoding ignores them,
// whatever the server's version sends.

// Bounds on what the engine reads from the server.
const (
	maxModelsBytes   = 4 << 20
	maxTokenizeBytes = 32 << 20
	// maxEmbedBytes: 2,048 inputs of 4,096 dimensions written as decimal
	// floats (~20 bytes each) are ~170 MB; more is refused.
	maxEmbedBytes = 256 << 20
	maxErrorBytes = 64 << 10
	// maxFrameBytes bounds one SSE line of a completion: a chunk carries a
	// few tokens.
	maxFrameBytes = 4 << 20
	// maxWholeBytes bounds a whole (non-streamed) reply: the text of a
	// long context, tool calls' arguments and their JSON escaping.
	maxWholeBytes = 32 << 20
)

// tokenizeRequest is /tokenize's chat form, which has no reasoning_effort:
// the engine puts what a completion's reasoning_effort adds to the
// template's arguments in ChatTemplateKwargs (templateKwargs).
type tokenizeRequest struct {
	Model               string           `json:"model"`
	Messages            []openai.Message `json:"messages"`
	Tools               []openai.Tool    `json:"tools,omitempty"`
	ChatTemplateKwargs  jsontext.Value   `json:"chat_template_kwargs,omitempty"`
	AddGenerationPrompt bool             `json:"add_generation_prompt"`
	AddSpecialTokens    bool             `json:"add_special_tokens"`
}

// modelList is vLLM's GET /v1/models: OpenAI's list, each model with the
// context length it was started with (max_model_len), which OpenAI's own
// list does not have.
type modelList struct {
	Data []listedModel `json:"data"`
}

type listedModel struct {
	ID          string `json:"id"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	MaxModelLen int64  `json:"max_model_len"`
}

type tokenizeResponse struct {
	Count       *int64 `json:"count"`
	MaxModelLen int64  `json:"max_model_len"`
}

// errorBody is vLLM's error response, {"error":{"message",...}}, which is
// not openai.ErrorResponse: its code is the HTTP status, a number; its 401
// for a wrong API key is {"error":"Unauthorized"}, and FastAPI's own
// answers (an unknown path) are {"detail":"Not Found"}.
type errorBody struct {
	Error  json.RawMessage `json:"error"`
	Detail any             `json:"detail"`
}

type errorObject struct {
	Message string `json:"message"`
	Type    string `json:"type"`
}
