package openai

import "github.com/go-json-experiment/json/jsontext"

// Object types: the "object" member of each reply.
const (
	ObjectChatCompletion      = "chat.completion"
	ObjectChatCompletionChunk = "chat.completion.chunk"
	ObjectEmbedding           = "embedding"
	ObjectList                = "list"
	ObjectModel               = "model"
)

// Roles of a message's author.
const (
	RoleSystem    = "system"
	RoleDeveloper = "developer"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Finish reasons of a choice.
const (
	FinishStop          = "stop"
	FinishLength        = "length"
	FinishToolCalls     = "tool_calls"
	FinishContentFilter = "content_filter"
)

// ToolTypeFunction is the type of a tool, a tool call and a named tool
// choice: the only one.
const ToolTypeFunction = "function"

// The tool_choice modes other than a named function.
const (
	ToolChoiceNone     = "none"
	ToolChoiceAuto     = "auto"
	ToolChoiceRequired = "required"
)

// Types of a response_format.
const (
	ResponseFormatText       = "text"
	ResponseFormatJSONObject = "json_object"
	ResponseFormatJSONSchema = "json_schema"
)

// ContentPartText is the type of a text content part.
const ContentPartText = "text"

// ReasoningEfforts are the values of reasoning_effort that OpenAI's API
// lists (openai-go v3.96), which vLLM takes too.
var ReasoningEfforts = []string{"none", "minimal", "low", "medium", "high", "xhigh", "max"}

// ChatCompletionRequest is the body of POST /v1/chat/completions, as a
// client sends it to the gateway and as the gateway sends it to a model
// server. Its members are in the order the engine writes them; the ones
// after StreamOptions are read by the edge and never sent on.
type ChatCompletionRequest struct {
	Model    string    `json:"model"`
	Messages []Message `json:"messages"`
	Tools    []Tool    `json:"tools,omitempty"`
	// ToolChoice is "none", "auto", "required" or a NamedToolChoice.
	ToolChoice  jsontext.Value `json:"tool_choice,omitempty"`
	Temperature *float64       `json:"temperature,omitempty"`
	TopP        *float64       `json:"top_p,omitempty"`
	MaxTokens   *int64         `json:"max_tokens,omitempty"`
	// Stop is a string or an array of strings.
	Stop             jsontext.Value `json:"stop,omitempty"`
	Seed             *int64         `json:"seed,omitempty"`
	FrequencyPenalty *float64       `json:"frequency_penalty,omitempty"`
	PresencePenalty  *float64       `json:"presence_penalty,omitempty"`
	// LogitBias maps token ids, written in decimal, to a bias.
	LogitBias      map[string]int64 `json:"logit_bias,omitempty"`
	ResponseFormat *ResponseFormat  `json:"response_format,omitempty"`
	// ChatTemplateKwargs is vLLM's: a JSON object of options for the
	// model's chat template (e.g. {"enable_thinking":false}).
	ChatTemplateKwargs jsontext.Value `json:"chat_template_kwargs,omitempty"`
	// ReasoningEffort is one of ReasoningEfforts.
	ReasoningEffort *string        `json:"reasoning_effort,omitempty"`
	Stream          bool           `json:"stream"`
	StreamOptions   *StreamOptions `json:"stream_options,omitempty"`

	MaxCompletionTokens *int64  `json:"max_completion_tokens,omitempty"`
	N                   *int64  `json:"n,omitempty"`
	User                *string `json:"user,omitempty"`
	ParallelToolCalls   *bool   `json:"parallel_tool_calls,omitempty"`
	Logprobs            *bool   `json:"logprobs,omitempty"`
	TopLogprobs         *int64  `json:"top_logprobs,omitempty"`
	// Functions and FunctionCall are OpenAI's deprecated function
	// calling, which tools and tool_choice replaced.
	Functions    jsontext.Value `json:"functions,omitempty"`
	FunctionCall jsontext.Value `json:"function_call,omitempty"`
}

// StreamOptions are a streamed request's options.
type StreamOptions struct {
	// IncludeUsage asks for "usage":null on every chunk and one more
	// chunk, without choices, carrying the usage.
	IncludeUsage bool `json:"include_usage"`
}

// Message is one message of a chat request.
type Message struct {
	Role *string `json:"role"`
	// Content is a string, an array of ContentPart, or null.
	Content    jsontext.Value `json:"content"`
	Name       string         `json:"name,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	ToolCalls  []ToolCall     `json:"tool_calls,omitempty"`
	// Reasoning is vLLM's: the reasoning a reasoning model returned with
	// an earlier assistant turn, sent back (null, as clients echo a reply
	// without any, is none).
	Reasoning *string `json:"reasoning,omitempty"`
	// FunctionCall is the deprecated form of an assistant's tool call.
	FunctionCall jsontext.Value `json:"function_call,omitempty"`
}

// ContentPart is one part of a message's content.
type ContentPart struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
}

// Tool is a tool offered to the model.
type Tool struct {
	Type     string             `json:"type"`
	Function FunctionDefinition `json:"function"`
}

// FunctionDefinition is a function tool.
type FunctionDefinition struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is a JSON Schema object.
	Parameters jsontext.Value `json:"parameters,omitempty"`
	Strict     *bool          `json:"strict,omitempty"`
}

// NamedToolChoice is a tool_choice that names the function to call.
type NamedToolChoice struct {
	Type     string             `json:"type"`
	Function ToolChoiceFunction `json:"function"`
}

// ToolChoiceFunction names the function of a NamedToolChoice.
type ToolChoiceFunction struct {
	Name string `json:"name"`
}

// ToolCall is a complete tool call: in an assistant message of a request,
// and in a reply's message.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is a tool call's function and its arguments, JSON text.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ResponseFormat is {"type":"text"}, {"type":"json_object"} or
// {"type":"json_schema","json_schema":{...}}.
type ResponseFormat struct {
	Type       *string     `json:"type"`
	JSONSchema *JSONSchema `json:"json_schema,omitempty"`
}

// JSONSchema is the schema of a json_schema response_format.
type JSONSchema struct {
	Name        *string `json:"name"`
	Description string  `json:"description,omitempty"`
	// Schema is a JSON Schema object.
	Schema jsontext.Value `json:"schema,omitempty"`
	Strict *bool          `json:"strict,omitempty"`
}

// ChatCompletion is the reply to a chat request that is not streamed.
type ChatCompletion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   Usage    `json:"usage"`
}

// Choice is one choice of a ChatCompletion.
type Choice struct {
	Index        int             `json:"index"`
	Message      ResponseMessage `json:"message"`
	FinishReason string          `json:"finish_reason"`
	// Logprobs is always null: no engine returns log probabilities.
	Logprobs *struct{} `json:"logprobs"`
}

// ResponseMessage is the assistant's message of a Choice.
type ResponseMessage struct {
	Role string `json:"role"`
	// Content is null for a reply made of tool calls alone.
	Content   *string    `json:"content"`
	Refusal   *string    `json:"refusal"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Reasoning is a reasoning model's reasoning, absent for other
	// models: vLLM's and OpenRouter's member (OpenAI's SDKs keep it as an
	// extra field).
	Reasoning string `json:"reasoning,omitempty"`
	// ReasoningContent is older vLLM releases' name for Reasoning, read
	// from a model server's reply; never written by the gateway.
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

// Usage is the tokens of a chat completion.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}
