package vllmfake

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"time"

	"github.com/tollgate-dev/tollgate/internal/openai"
)

// EmbeddingDim is the length of the fake's embeddings when the request
// asks for no dimensions.
const EmbeddingDim = 16

type embeddingRequest struct {
	Model            *string         `json:"model"`
	Input            json.RawMessage `json:"input"`
	EncodingFormat   *string         `json:"encoding_format"`
	Dimensions       *int            `json:"dimensions"`
	AddSpecialTokens *bool           `json:"add_special_tokens"`
}

// handleEmbeddings is POST /v1/embeddings: input as a string, a list of
// strings, a list of token ids or a list of lists of token ids.
func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request, body []byte) {
	if !checkJSONRequest(w, r) {
		return
	}
	var req embeddingRequest
	if !decode(w, body, &req) {
		return
	}
	if len(req.Input) == 0 {
		writeValidation(w, missing("input", body))
		return
	}
	inputs, ok := embeddingInputs(req.Input, boolOr(req.AddSpecialTokens, true))
	if !ok {
		writeValidation(w, validationError{typ: "list_type", loc: "body.input", msg: "Input should be a valid list", input: fieldInput(body, "input")})
		return
	}
	format := "float"
	if req.EncodingFormat != nil {
		format = *req.EncodingFormat
	}
	if format != "float" && format != "base64" && format != "bytes" {
		writeValidation(w, validationError{typ: "literal_error", loc: "body.encoding_format", msg: "Input should be 'float', 'base64' or 'bytes'", input: pyRepr(format), ctx: "{'expected': \"'float', 'base64' or 'bytes'\"}"})
		return
	}
	if format == "bytes" {
		// vLLM answers with a binary body; the fake does not copy it.
		writeError(w, http.StatusNotImplemented, "encoding_format bytes is not supported by this fake.", "")
		return
	}
	m, ok := s.model(req.Model, true)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist.", deref(req.Model)), "model")
		return
	}
	if !m.Embedding {
		writeJSON(w, http.StatusNotFound, obj{{"detail", "Not Found"}})
		return
	}
	dim := EmbeddingDim
	if req.Dimensions != nil {
		if *req.Dimensions < 1 || *req.Dimensions > EmbeddingDim {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("Dimensions must be between 1 and %d, got %d.", EmbeddingDim, *req.Dimensions), "dimensions")
			return
		}
		dim = *req.Dimensions
	}
	data := make([]any, 0, len(inputs))
	total := 0
	for i, ids := range inputs {
		if len(ids) > m.maxLen() {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens in the input for embedding generation. Please reduce the length of the input.", m.maxLen(), len(ids)), "input_tokens")
			return
		}
		total += len(ids)
		vec := Embedding(ids, dim)
		var emb any
		if format == "float" {
			fs := make([]pyFloat, len(vec))
			for j, f := range vec {
				fs[j] = pyFloat(f)
			}
			emb = fs
		} else {
			buf := make([]byte, 4*len(vec))
			for j, f := range vec {
				binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(f))
			}
			emb = base64.StdEncoding.EncodeToString(buf)
		}
		data = append(data, obj{{"index", i}, {"object", openai.ObjectEmbedding}, {"embedding", emb}})
	}
	writeJSON(w, http.StatusOK, obj{
		{"id", "embd-" + requestID(r)},
		{"object", openai.ObjectList},
		{"created", time.Now().Unix()},
		{"model", m.ID},
		{"data", data},
		{"usage", obj{
			{"prompt_tokens", total},
			{"total_tokens", total},
			{"completion_tokens", 0},
			{"prompt_tokens_details", nil},
		}},
	})
}

// embeddingInputs turns the input union into token id lists; strings are
// tokenised with BOS in front unless add_special_tokens is false.
func embeddingInputs(raw json.RawMessage, addSpecial bool) ([][]int, bool) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		ids, _ := promptTokens(one, addSpecial)
		return [][]int{ids}, true
	}
	var strs []string
	if json.Unmarshal(raw, &strs) == nil {
		out := make([][]int, len(strs))
		for i, s := range strs {
			out[i], _ = promptTokens(s, addSpecial)
		}
		return out, true
	}
	var ids []int
	if json.Unmarshal(raw, &ids) == nil {
		return [][]int{ids}, true
	}
	var lists [][]int
	if json.Unmarshal(raw, &lists) == nil {
		return lists, true
	}
	return nil, false
}

// Embedding is the fake model's embedding of a token sequence: EmbeddingDim
// values derived from FNV-1a hashes of the ids, cut to dim (vLLM's
// matryoshka "dimensions") and then L2-normalised, as vLLM normalises
// embedding outputs by default. Values are float32, as the model's.
func Embedding(ids []int, dim int) []float32 {
	full := make([]float64, EmbeddingDim)
	for j := range full {
		h := fnv.New32a()
		_, _ = fmt.Fprint(h, j, ids)
		full[j] = float64(h.Sum32())/float64(math.MaxUint32)*2 - 1
	}
	v := full[:dim]
	var norm float64
	for _, x := range v {
		norm += x * x
	}
	norm = math.Sqrt(norm)
	out := make([]float32, dim)
	for j, x := range v {
		out[j] = float32(x / norm)
	}
	return out
}
