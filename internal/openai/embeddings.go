package openai

import "github.com/go-json-experiment/json/jsontext"

// Encoding formats of an embeddings request.
const (
	EncodingFloat  = "float"
	EncodingBase64 = "base64"
)

// EmbeddingRequest is the body of POST /v1/embeddings.
type EmbeddingRequest struct {
	Model string `json:"model"`
	// Input is a string, an array of strings, an array of token ids or an
	// array of token-id arrays.
	Input          jsontext.Value `json:"input"`
	Dimensions     *int64         `json:"dimensions,omitempty"`
	EncodingFormat *string        `json:"encoding_format,omitempty"`
	User           *string        `json:"user,omitempty"`
}

// EmbeddingVector is the JSON type of an embedding: numbers for the
// encoding format float, or a string for base64 (the little-endian bytes
// of the float32 values, in standard base64).
type EmbeddingVector interface{ []float32 | string }

// EmbeddingResponse is the reply to an embeddings request, its embeddings
// of the type V its encoding format asked for.
type EmbeddingResponse[V EmbeddingVector] struct {
	Object string         `json:"object"`
	Data   []Embedding[V] `json:"data"`
	Model  string         `json:"model"`
	// Usage is a pointer so that a reader can tell a reply without one.
	Usage *EmbeddingUsage `json:"usage"`
}

// Embedding is one embedding of an EmbeddingResponse, of input Index.
type Embedding[V EmbeddingVector] struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding V      `json:"embedding"`
}

// EmbeddingUsage is the tokens of an embeddings request.
type EmbeddingUsage struct {
	PromptTokens int64 `json:"prompt_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
}
