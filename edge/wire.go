package edge

import "encoding/json"

// The OpenAI wire messages are internal/openai's. Requests are decoded
// into them by decodeJSON (encoding/json/v2 semantics: names match
// exactly) and checked member by member (chat_request.go,
// embeddings.go); replies are encoded with encoding/json, a stream's
// chunks by chunkEncoder (chunk.go).

// mustMarshal encodes one of the wire structs, which cannot fail.
func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("edge: marshal: " + err.Error()) // only our own wire structs are marshalled
	}
	return b
}
