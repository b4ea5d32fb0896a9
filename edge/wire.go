package edge

import (
	"encoding/json"

	"github.com/go-json-experiment/json/jsontext"
)

// Wire structs of the OpenAI chat-completion protocol. Field order and tags
// are what the official SDKs parse; pointers stand where OpenAI sends null.
//
// Requests are decoded by decodeJSON (encoding/json/v2 semantics: names
// match exactly), replies encoded with encoding/json.

// chatRequest is POST /v1/chat/completions. Polymorphic fields stay raw and
// are decoded by decodeChat, which names the field at fault.
type chatRequest struct {
	Model               *string        `json:"model"`
	Messages            []chatMessage  `json:"messages"`
	Stream              *bool          `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options"`
	Temperature         *float64       `json:"temperature"`
	TopP                *float64       `json:"top_p"`
	MaxTokens           *int64         `json:"max_tokens"`
	MaxCompletionTokens *int64         `json:"max_completion_tokens"`
	N                   *int64         `json:"n"`
	Stop                jsontext.Value `json:"stop"`
	Seed                *int64         `json:"seed"`
	Tools               []chatTool     `json:"tools"`
	ToolChoice          jsontext.Value `json:"tool_choice"`
	// Passed to the engine, which enforces it or refuses the request.
	ResponseFormat *responseFormat `json:"response_format"`
	// Checked as OpenAI checks them, then passed to the engine.
	FrequencyPenalty *float64         `json:"frequency_penalty"`
	PresencePenalty  *float64         `json:"presence_penalty"`
	LogitBias        map[string]int64 `json:"logit_bias"`
	// vLLM's: options for the model's chat template, a JSON object passed
	// to the engine as given (e.g. {"enable_thinking":false}).
	ChatTemplateKwargs jsontext.Value `json:"chat_template_kwargs"`
	// One of OpenAI's values (reasoningEfforts), passed to the engine.
	ReasoningEffort *string `json:"reasoning_effort"`
	// Checked as OpenAI checks them (type, and range where it has one),
	// then ignored: no engine has a use for them.
	User              *string `json:"user"`
	ParallelToolCalls *bool   `json:"parallel_tool_calls"`
	// Refused unless false or null (logprobs) or null (top_logprobs): no
	// engine returns log probabilities, and a reply whose "logprobs" is
	// null must not pass for one that was asked for them.
	Logprobs    *bool  `json:"logprobs"`
	TopLogprobs *int64 `json:"top_logprobs"`
	// OpenAI's deprecated function calling, refused unless null: the
	// functions would otherwise reach no model, silently.
	Functions    jsontext.Value `json:"functions"`
	FunctionCall jsontext.Value `json:"function_call"`
}

// responseFormat is {"type":"text"}, {"type":"json_object"} or
// {"type":"json_schema","json_schema":{"name",...}}.
type responseFormat struct {
	Type       *string `json:"type"`
	JSONSchema *struct {
		Name        *string        `json:"name"`
		Description *string        `json:"description"`
		Schema      jsontext.Value `json:"schema"`
		Strict      *bool          `json:"strict"`
	} `json:"json_schema"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role       *string        `json:"role"`
	Content    jsontext.Value `json:"content"`
	Name       string         `json:"name"`
	ToolCallID string         `json:"tool_call_id"`
	ToolCalls  []wireToolCall `json:"tool_calls"`
	// Reasoning is the reasoning a reasoning model returned with an
	// earlier assistant turn, sent back (vLLM's field; not OpenAI's).
	Reasoning *string `json:"reasoning"`
	// FunctionCall is the deprecated form of an assistant's tool call,
	// refused unless null.
	FunctionCall jsontext.Value `json:"function_call"`
}

type contentPart struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function toolFunction `json:"function"`
}

type toolFunction struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  jsontext.Value `json:"parameters,omitempty"`
	Strict      *bool          `json:"strict,omitempty"`
}

type namedToolChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// wireToolCall is a complete tool call, in requests and in replies.
type wireToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// chatCompletion is the non-streamed reply.
type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   usage        `json:"usage"`
}

type chatChoice struct {
	Index        int             `json:"index"`
	Message      responseMessage `json:"message"`
	FinishReason string          `json:"finish_reason"`
	Logprobs     *struct{}       `json:"logprobs"`
}

type responseMessage struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	Refusal   *string        `json:"refusal"`
	ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
	// Reasoning is a reasoning model's reasoning, absent for other
	// models (the field vLLM and OpenRouter use; OpenAI's SDKs keep it
	// as an extra field).
	Reasoning string `json:"reasoning,omitempty"`
}

type usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// chatChunk is one event of a streamed reply. Usage is the raw `null` on
// every chunk when the client asked for include_usage, absent otherwise, and
// the usage object on the extra last chunk.
//
// The chunk types are the reference for the bytes chunkEncoder (chunk.go)
// writes by hand; chunk_internal_test.go marshals them to check it.
type chatChunk struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Created int64           `json:"created"`
	Model   string          `json:"model"`
	Choices []chunkChoice   `json:"choices"`
	Usage   json.RawMessage `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int       `json:"index"`
	Delta        delta     `json:"delta"`
	FinishReason *string   `json:"finish_reason"`
	Logprobs     *struct{} `json:"logprobs"`
}

type delta struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	Reasoning string          `json:"reasoning,omitempty"`
	ToolCalls []toolCallDelta `json:"tool_calls,omitempty"`
}

// toolCallDelta: the first piece of a call carries id, type and name with
// empty arguments; later pieces carry only index and argument text.
type toolCallDelta struct {
	Index    int           `json:"index"`
	ID       string        `json:"id,omitempty"`
	Type     string        `json:"type,omitempty"`
	Function functionDelta `json:"function"`
}

type functionDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// embeddingsRequest is POST /v1/embeddings.
type embeddingsRequest struct {
	Model          *string        `json:"model"`
	Input          jsontext.Value `json:"input"`
	EncodingFormat *string        `json:"encoding_format"`
	Dimensions     *int64         `json:"dimensions"`
	User           *string        `json:"user"` // checked, ignored
}

type embeddingsResponse struct {
	Object string          `json:"object"`
	Data   []embeddingItem `json:"data"`
	Model  string          `json:"model"`
	Usage  embeddingsUsage `json:"usage"`
}

// embeddingItem.Embedding is []float32 or a base64 string.
type embeddingItem struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

type embeddingsUsage struct {
	PromptTokens int64 `json:"prompt_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
}

type modelList struct {
	Object string      `json:"object"`
	Data   []modelCard `json:"data"`
}

type modelCard struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type errorEnvelope struct {
	Error *apiError `json:"error"`
}

// mustMarshal encodes one of the wire structs above, which cannot fail.
func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("edge: marshal: " + err.Error()) // only our own wire structs are marshalled
	}
	return b
}
