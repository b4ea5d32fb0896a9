package openai

import "github.com/go-json-experiment/json/jsontext"

// ChatCompletionChunk is one event of a streamed chat reply.
//
// Usage is absent on every chunk but the last one, which has no choices,
// when the request asked for include_usage. OpenAI then also sends
// "usage":null on every other chunk: a third state a pointer cannot hold,
// written by the edge's chunk encoder, which is the only writer of chunks
// (a test there marshals this struct to check its bytes).
type ChatCompletionChunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []ChunkChoice `json:"choices"`
	Usage   *Usage        `json:"usage,omitempty"`
	// Error is set on the event a server sends in a chunk's place when
	// the completion fails after its stream started: {"error":{...}},
	// whose object is the server's (vLLM's code is a number), so kept
	// raw. A chunk never has it.
	Error jsontext.Value `json:"error,omitempty"`
}

// ChunkChoice is the choice of a chunk.
type ChunkChoice struct {
	Index int   `json:"index"`
	Delta Delta `json:"delta"`
	// FinishReason is null until the choice's last chunk.
	FinishReason *string `json:"finish_reason"`
	// Logprobs is always null: no engine returns log probabilities.
	Logprobs *struct{} `json:"logprobs"`
}

// Delta is what a chunk adds to the reply: the role on the first chunk,
// then pieces of content, reasoning or tool calls.
type Delta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
	// Reasoning is vLLM's: a piece of a reasoning model's reasoning.
	Reasoning *string `json:"reasoning,omitempty"`
	// ReasoningContent is what vLLM called Reasoning before it renamed
	// the member; servers of then send only it, later ones both. The
	// gateway reads it and never writes it.
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCallDelta `json:"tool_calls,omitempty"`
}

// ToolCallDelta is a piece of a tool call. The first piece of a call
// carries its id, type and name, with empty arguments; later pieces carry
// its index and a piece of the argument text.
type ToolCallDelta struct {
	Index    int           `json:"index"`
	ID       string        `json:"id,omitempty"`
	Type     string        `json:"type,omitempty"`
	Function FunctionDelta `json:"function"`
}

// FunctionDelta is the function of a ToolCallDelta.
type FunctionDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}
