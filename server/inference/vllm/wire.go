package vllm

import (
	"encoding/json"

	"github.com/go-json-experiment/json/jsontext"
)

// The server's JSON, as far as the engine reads or writes it. Requests are
// written with encoding/json; answers are read with
// github.com/go-json-experiment/json (the edge's decoder), the faster of
// the two on a completion's chunks (docs/engines.md, "Performance"). Fields the
// engine has no use for (vLLM adds many: logprobs, token_ids,
// kv_transfer_params…) are left out: decoding ignores
// them, whatever the server's version sends.

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
)

type modelList struct {
	Data []struct {
		ID      string `json:"id"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	} `json:"data"`
}

type chatRequest struct {
	Model          string          `json:"model"`
	Messages       []message       `json:"messages"`
	Tools          []tool          `json:"tools,omitempty"`
	ToolChoice     any             `json:"tool_choice,omitempty"`
	Temperature    *float64        `json:"temperature,omitempty"`
	TopP           *float64        `json:"top_p,omitempty"`
	MaxTokens      *int64          `json:"max_tokens,omitempty"`
	Stop           []string        `json:"stop,omitempty"`
	Seed           *int64          `json:"seed,omitempty"`
	FrequencyPen   *float64        `json:"frequency_penalty,omitempty"`
	PresencePen    *float64        `json:"presence_penalty,omitempty"`
	LogitBias      map[int64]int32 `json:"logit_bias,omitempty"`
	ResponseFormat *responseFormat `json:"response_format,omitempty"`
	// ChatTemplateKwargs is the client's JSON object, as it gave it.
	ChatTemplateKwargs json.RawMessage `json:"chat_template_kwargs,omitempty"`
	// ReasoningEffort is OpenAI's, which vLLM hands to the chat template.
	ReasoningEffort *string        `json:"reasoning_effort,omitempty"`
	Stream          bool           `json:"stream"`
	StreamOptions   *streamOptions `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// message is a chat message; Content is a string, a []contentPart, or nil
// for null.
type message struct {
	Role       string     `json:"role"`
	Content    any        `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	// Reasoning is an assistant turn's reasoning, sent back for templates
	// that keep it (vLLM reads `reasoning` since it renamed the field).
	Reasoning string `json:"reasoning,omitempty"`
}

type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type toolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type tool struct {
	Type     string      `json:"type"`
	Function functionDef `json:"function"`
}

type functionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

type namedToolChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

type responseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *jsonSchema `json:"json_schema,omitempty"`
}

type jsonSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// chunk is one event of a streamed completion, or the error event vLLM
// sends in place of the rest when generation fails after the 200.
type chunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content *string `json:"content"`
			// Reasoning is a reasoning parser's output; servers from
			// before vLLM's rename send it as reasoning_content only,
			// later ones as both or as reasoning only.
			Reasoning        *string         `json:"reasoning"`
			ReasoningContent *string         `json:"reasoning_content"`
			ToolCalls        []toolCallDelta `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage         `json:"usage"`
	Error jsontext.Value `json:"error"`
}

type toolCallDelta struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
}

// tokenizeRequest is /tokenize's chat form, which has no reasoning_effort:
// the engine puts what a completion's reasoning_effort adds to the
// template's arguments in ChatTemplateKwargs (templateKwargs).
type tokenizeRequest struct {
	Model               string          `json:"model"`
	Messages            []message       `json:"messages"`
	Tools               []tool          `json:"tools,omitempty"`
	ChatTemplateKwargs  json.RawMessage `json:"chat_template_kwargs,omitempty"`
	AddGenerationPrompt bool            `json:"add_generation_prompt"`
	AddSpecialTokens    bool            `json:"add_special_tokens"`
}

type tokenizeResponse struct {
	Count       *int64 `json:"count"`
	MaxModelLen int64  `json:"max_model_len"`
}

type embeddingRequest struct {
	Model          string `json:"model"`
	Input          any    `json:"input"` // []string or [][]int64
	Dimensions     int32  `json:"dimensions,omitempty"`
	EncodingFormat string `json:"encoding_format"`
}

type embeddingResponse struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
	Usage *usage `json:"usage"`
}

// errorBody is vLLM's error response, {"error":{"message",...}}; its 401
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
