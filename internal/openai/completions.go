package openai

import "github.com/go-json-experiment/json/jsontext"

// ObjectTextCompletion is the "object" of a legacy completion and of each
// chunk of its stream: OpenAI uses the same for both.
const ObjectTextCompletion = "text_completion"

// CompletionRequest is the body of POST /v1/completions (OpenAI's legacy
// completions), as a client sends it to the gateway.
type CompletionRequest struct {
	Model string `json:"model"`
	// Prompt is a string or an array of strings (or, in OpenAI's API,
	// token ids), kept raw for the edge to tell them apart.
	Prompt      jsontext.Value `json:"prompt"`
	Suffix      *string        `json:"suffix"`
	MaxTokens   *int64         `json:"max_tokens"`
	Temperature *float64       `json:"temperature"`
	TopP        *float64       `json:"top_p"`
	// Stop is a string or an array of strings.
	Stop          jsontext.Value `json:"stop"`
	Seed          *int64         `json:"seed"`
	N             *int64         `json:"n"`
	BestOf        *int64         `json:"best_of"`
	Echo          *bool          `json:"echo"`
	Logprobs      *int64         `json:"logprobs"`
	Stream        bool           `json:"stream"`
	StreamOptions *StreamOptions `json:"stream_options"`
}

// Completion is a legacy completion, and each chunk of its stream (whose
// choices carry a piece of the text, and whose usage is absent but on the
// last chunk of a stream with include_usage).
type Completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   *Usage             `json:"usage,omitempty"`
}

// CompletionChoice is a choice of a Completion.
type CompletionChoice struct {
	Text  string `json:"text"`
	Index int    `json:"index"`
	// Logprobs is always null: no engine returns log probabilities.
	Logprobs *struct{} `json:"logprobs"`
	// FinishReason is null on every chunk of a stream but the last one
	// with choices.
	FinishReason *string `json:"finish_reason"`
}
