package openai

import "github.com/go-json-experiment/json/jsontext"

// The Responses API (POST /v1/responses): its request, its response
// object, and the named events of its stream. Members are in the order
// OpenAI writes them; optional members of the request are pointers or raw
// values, as for chat.

// Object types and names of the Responses API.
const (
	ObjectResponse = "response"

	ItemMessage            = "message"
	ItemFunctionCall       = "function_call"
	ItemFunctionCallOutput = "function_call_output"

	PartInputText  = "input_text"
	PartOutputText = "output_text"

	ResponseStatusCompleted  = "completed"
	ResponseStatusIncomplete = "incomplete"
	ResponseStatusFailed     = "failed"
	ResponseStatusInProgress = "in_progress"
)

// Event names of a streamed response, as the `event:` line and the
// payload's type member carry them.
const (
	EventResponseCreated       = "response.created"
	EventResponseInProgress    = "response.in_progress"
	EventOutputItemAdded       = "response.output_item.added"
	EventContentPartAdded      = "response.content_part.added"
	EventOutputTextDelta       = "response.output_text.delta"
	EventOutputTextDone        = "response.output_text.done"
	EventFunctionArgsDelta     = "response.function_call_arguments.delta"
	EventFunctionArgsDone      = "response.function_call_arguments.done"
	EventContentPartDone       = "response.content_part.done"
	EventOutputItemDone        = "response.output_item.done"
	EventResponseCompleted     = "response.completed"
	EventResponseIncomplete    = "response.incomplete"
	EventResponseFailed        = "response.failed"
	IncompleteMaxOutputTokens  = "max_output_tokens"
	IncompleteContentFilter    = "content_filter"
	ResponseTruncationDisabled = "disabled"
)

// ResponseRequest is the body of POST /v1/responses.
type ResponseRequest struct {
	Model string `json:"model,omitempty"`
	// Input is a string (one user message) or an array of items.
	Input        jsontext.Value `json:"input,omitempty"`
	Instructions *string        `json:"instructions,omitempty"`
	Tools        []ResponseTool `json:"tools,omitempty"`
	// ToolChoice is "none", "auto", "required" or
	// {"type":"function","name":...}.
	ToolChoice         jsontext.Value      `json:"tool_choice,omitempty"`
	ParallelToolCalls  *bool               `json:"parallel_tool_calls,omitempty"`
	MaxOutputTokens    *int64              `json:"max_output_tokens,omitempty"`
	Temperature        *float64            `json:"temperature,omitempty"`
	TopP               *float64            `json:"top_p,omitempty"`
	Text               *ResponseText       `json:"text,omitempty"`
	Reasoning          *ResponseReasoning  `json:"reasoning,omitempty"`
	Metadata           map[string]string   `json:"metadata,omitempty"`
	Store              *bool               `json:"store,omitempty"`
	PreviousResponseID *string             `json:"previous_response_id,omitempty"`
	Stream             bool                `json:"stream,omitempty"`
	Background         *bool               `json:"background,omitempty"`
	Conversation       jsontext.Value      `json:"conversation,omitempty"`
	Include            []string            `json:"include,omitempty"`
	Truncation         *string             `json:"truncation,omitempty"`
	User               *string             `json:"user,omitempty"`
	StreamOptions      *ResponseStreamOpts `json:"stream_options,omitempty"`
}

// ResponseStreamOpts are a streamed request's options.
type ResponseStreamOpts struct {
	IncludeObfuscation *bool `json:"include_obfuscation,omitempty"`
}

// ResponseInputItem is one item of a request's input: a message (type
// "message" or absent, with a role), a function_call the model made, or a
// function_call_output the caller sends back.
type ResponseInputItem struct {
	Type *string `json:"type,omitempty"`
	Role *string `json:"role,omitempty"`
	// Content is a string or an array of input_text (output_text for
	// an assistant's message) parts.
	Content jsontext.Value `json:"content,omitempty"`
	ID      string         `json:"id,omitempty"`
	CallID  string         `json:"call_id,omitempty"`
	Name    string         `json:"name,omitempty"`
	// Arguments is a function_call's arguments, JSON text.
	Arguments *string `json:"arguments,omitempty"`
	// Output is a function_call_output's result: a string or an array
	// of input_text parts.
	Output jsontext.Value `json:"output,omitempty"`
	Status string         `json:"status,omitempty"`
}

// ResponseInputPart is a part of an input message's content.
type ResponseInputPart struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
}

// ResponseTool is a tool of a request, and as the response echoes it: a
// function tool is flat, {"type":"function","name":...}, unlike chat's.
type ResponseTool struct {
	Type        string         `json:"type"`
	Name        string         `json:"name"`
	Description *string        `json:"description"`
	Parameters  jsontext.Value `json:"parameters"`
	Strict      *bool          `json:"strict"`
}

// ResponseToolChoiceFunction is a tool_choice naming a function.
type ResponseToolChoiceFunction struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

// ResponseText is the text member: the format of the output text.
type ResponseText struct {
	Format *ResponseTextFormat `json:"format,omitempty"`
}

// ResponseTextFormat is {"type":"text"}, {"type":"json_object"} or
// {"type":"json_schema","name":...,"schema":...}: flat, unlike chat's
// response_format.
type ResponseTextFormat struct {
	Type        *string        `json:"type"`
	Name        *string        `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Schema      jsontext.Value `json:"schema,omitempty"`
	Strict      *bool          `json:"strict,omitempty"`
}

// ResponseReasoning is the reasoning member: effort for reasoning models.
type ResponseReasoning struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

// Response is the response object: the reply to a request that is not
// streamed, the payload of the stream's lifecycle events, and what
// GET /v1/responses/{id} returns.
type Response struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	Error              *ResponseError     `json:"error"`
	IncompleteDetails  *IncompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int64             `json:"max_output_tokens"`
	Model              string             `json:"model"`
	Output             []OutputItem       `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Reasoning          ResponseReasoning  `json:"reasoning"`
	Store              bool               `json:"store"`
	Temperature        float64            `json:"temperature"`
	Text               ResponseTextOut    `json:"text"`
	ToolChoice         jsontext.Value     `json:"tool_choice"`
	Tools              []ResponseTool     `json:"tools"`
	TopP               float64            `json:"top_p"`
	Truncation         string             `json:"truncation"`
	Usage              *ResponseUsage     `json:"usage"`
	User               *string            `json:"user"`
	Metadata           map[string]string  `json:"metadata"`
}

// ResponseTextOut is the text member as a response echoes it.
type ResponseTextOut struct {
	Format jsontext.Value `json:"format"`
}

// ResponseError is a failed response's error.
type ResponseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// IncompleteDetails says why a response is incomplete.
type IncompleteDetails struct {
	Reason string `json:"reason"`
}

// ResponseUsage is a response's tokens.
type ResponseUsage struct {
	InputTokens         int64               `json:"input_tokens"`
	InputTokensDetails  InputTokensDetails  `json:"input_tokens_details"`
	OutputTokens        int64               `json:"output_tokens"`
	OutputTokensDetails OutputTokensDetails `json:"output_tokens_details"`
	TotalTokens         int64               `json:"total_tokens"`
}

// InputTokensDetails: no engine reports cached tokens (always 0).
type InputTokensDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

// OutputTokensDetails: reasoning tokens are not told apart (always 0).
type OutputTokensDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// OutputItem is an item of a response's output: *MessageItem or
// *FunctionCallItem.
type OutputItem interface{ outputItem() }

// MessageItem is the assistant's text.
type MessageItem struct {
	ID      string       `json:"id"`
	Type    string       `json:"type"`
	Status  string       `json:"status"`
	Content []OutputText `json:"content"`
	Role    string       `json:"role"`
}

// OutputText is a part of a MessageItem.
type OutputText struct {
	Type        string     `json:"type"`
	Annotations []struct{} `json:"annotations"`
	Logprobs    []struct{} `json:"logprobs"`
	Text        string     `json:"text"`
}

// FunctionCallItem is a call of a function tool.
type FunctionCallItem struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	Arguments string `json:"arguments"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
}

func (*MessageItem) outputItem()      {}
func (*FunctionCallItem) outputItem() {}

// NewOutputText is an output_text part holding text.
func NewOutputText(text string) OutputText {
	return OutputText{Type: PartOutputText, Annotations: []struct{}{}, Logprobs: []struct{}{}, Text: text}
}

// The events of a streamed response. Each payload has its type first,
// then its members in the SDKs' (alphabetical) order.

// ResponseEvent is response.created, .in_progress, .completed,
// .incomplete and .failed.
type ResponseEvent struct {
	Type           string    `json:"type"`
	Response       *Response `json:"response"`
	SequenceNumber int64     `json:"sequence_number"`
}

// OutputItemEvent is response.output_item.added and .done.
type OutputItemEvent struct {
	Type           string     `json:"type"`
	Item           OutputItem `json:"item"`
	OutputIndex    int        `json:"output_index"`
	SequenceNumber int64      `json:"sequence_number"`
}

// ContentPartEvent is response.content_part.added and .done.
type ContentPartEvent struct {
	Type           string     `json:"type"`
	ContentIndex   int        `json:"content_index"`
	ItemID         string     `json:"item_id"`
	OutputIndex    int        `json:"output_index"`
	Part           OutputText `json:"part"`
	SequenceNumber int64      `json:"sequence_number"`
}

// TextDeltaEvent is response.output_text.delta.
type TextDeltaEvent struct {
	Type           string     `json:"type"`
	ContentIndex   int        `json:"content_index"`
	Delta          string     `json:"delta"`
	ItemID         string     `json:"item_id"`
	Logprobs       []struct{} `json:"logprobs"`
	OutputIndex    int        `json:"output_index"`
	SequenceNumber int64      `json:"sequence_number"`
}

// TextDoneEvent is response.output_text.done.
type TextDoneEvent struct {
	Type           string     `json:"type"`
	ContentIndex   int        `json:"content_index"`
	ItemID         string     `json:"item_id"`
	Logprobs       []struct{} `json:"logprobs"`
	OutputIndex    int        `json:"output_index"`
	SequenceNumber int64      `json:"sequence_number"`
	Text           string     `json:"text"`
}

// ArgumentsDeltaEvent is response.function_call_arguments.delta.
type ArgumentsDeltaEvent struct {
	Type           string `json:"type"`
	Delta          string `json:"delta"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	SequenceNumber int64  `json:"sequence_number"`
}

// ArgumentsDoneEvent is response.function_call_arguments.done.
type ArgumentsDoneEvent struct {
	Type           string `json:"type"`
	Arguments      string `json:"arguments"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	SequenceNumber int64  `json:"sequence_number"`
}

// DeletedResponse is the reply to DELETE /v1/responses/{id}.
type DeletedResponse struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}

// ObjectResponseDeleted is a DeletedResponse's object.
const ObjectResponseDeleted = "response.deleted"
