package edge

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"net/http"

	"github.com/go-json-experiment/json/jsontext"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/openai"
)

// maxEmbedArray bounds every array of an embeddings input, as OpenAI's
// limits do ("any array must be 2048 dimensions or less"): at most 2048
// inputs, and at most 2048 token ids in one token-id array.
const maxEmbedArray = 2048

// maxEmbedTextBytes bounds each text input, in bytes of UTF-8: the
// inference API's bound (proto/tollgate/inference/v1), checked here so
// that the refusal names input or input[i] as the client sent it.
const maxEmbedTextBytes = 1 << 20

// embedTooLong is the refusal of a text input over maxEmbedTextBytes.
func embedTooLong(param string, n int) *apiError {
	return invalid(param, "%s is %d bytes; at most %d bytes (1 MiB) are accepted", param, n, maxEmbedTextBytes)
}

// embeddings serves POST /v1/embeddings.
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request, rc *requestContext) {
	if !s.readBody(w, r, rc) {
		return
	}
	req, b64, aerr := decodeEmbeddings(rc.call.RequestBody, rc.id)
	if aerr != nil {
		s.respondError(w, r, rc, aerr)
		return
	}
	rc.call.Model = req.GetModel()
	if err := rc.call.DecideEmbeddings(r.Context(), req); err != nil {
		s.refuse(w, r, rc, err)
		return
	}
	if err := rc.call.ReserveEmbeddings(r.Context(), req); err != nil {
		s.refuse(w, r, rc, err)
		return
	}
	s.limitHeaders(w, rc)
	resp, err := rc.call.Embed(r.Context(), req)
	if err != nil {
		s.refuse(w, r, rc, err)
		return
	}
	var body []byte
	if b64 {
		body = embeddingsReply(req.GetModel(), resp, encodeFloat32s)
	} else {
		body = embeddingsReply(req.GetModel(), resp, func(v []float32) []float32 { return v })
	}
	s.respondUsed(w, r, rc, rc.call.PromptTokens, body)
}

// embeddingsReply is the reply's JSON, each embedding written by vector
// as its encoding format asks.
func embeddingsReply[V openai.EmbeddingVector](model string, resp *inferencev1.EmbedResponse, vector func([]float32) V) []byte {
	out := openai.EmbeddingResponse[V]{Object: openai.ObjectList, Model: model, Data: make([]openai.Embedding[V], len(resp.GetEmbeddings()))}
	for i, e := range resp.GetEmbeddings() {
		out.Data[i] = openai.Embedding[V]{Object: openai.ObjectEmbedding, Index: i, Embedding: vector(e.GetValues())}
	}
	prompt := resp.GetUsage().GetPromptTokens()
	out.Usage = &openai.EmbeddingUsage{PromptTokens: prompt, TotalTokens: prompt}
	return mustMarshal(out)
}

// encodeFloat32s is the standard base64 of the little-endian float32 bytes.
func encodeFloat32s(v []float32) string {
	raw := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(raw)
}

// decodeEmbeddings parses an embeddings body. input may be a string, an
// array of strings, an array of token ids or an array of such arrays.
func decodeEmbeddings(body []byte, requestID string) (*inferencev1.EmbedRequest, bool, *apiError) {
	var in openai.EmbeddingRequest
	if err := decodeJSON(body, &in); err != nil {
		return nil, false, err
	}
	model, aerr := requireModel(in.Model)
	if aerr != nil {
		return nil, false, aerr
	}
	b64 := false
	if f := in.EncodingFormat; f != nil {
		switch *f {
		case openai.EncodingFloat:
		case openai.EncodingBase64:
			b64 = true
		default:
			return nil, false, invalid("encoding_format", "encoding_format %q is not float or base64", *f)
		}
	}
	req := &inferencev1.EmbedRequest{RequestId: requestID, Model: model}
	if d := in.Dimensions; d != nil {
		if *d < 1 || *d > math.MaxInt32 {
			return nil, false, invalid("dimensions", "dimensions must be a positive integer")
		}
		req.Dimensions = int32(*d)
	}
	inputs, aerr := decodeInputs(in.Input)
	if aerr != nil {
		return nil, false, aerr
	}
	req.Inputs = inputs
	return req, b64, nil
}

func decodeInputs(raw jsontext.Value) ([]*inferencev1.EmbedInput, *apiError) {
	text := func(s string) *inferencev1.EmbedInput {
		return &inferencev1.EmbedInput{Input: &inferencev1.EmbedInput_Text{Text: s}}
	}
	tokens := func(ids []int64) *inferencev1.EmbedInput {
		return &inferencev1.EmbedInput{Input: &inferencev1.EmbedInput_Tokens{Tokens: &inferencev1.TokenIDs{Ids: ids}}}
	}
	wrong := invalid("input", "input must be a string, an array of strings, an array of token ids or an array of token-id arrays")
	switch firstByte(raw) {
	case 0, 'n':
		return nil, invalid("input", "input is required")
	case '"':
		var s string
		if unmarshal(raw, &s) != nil {
			return nil, wrong
		}
		if s == "" {
			return nil, invalid("input", "input must not be empty")
		}
		if len(s) > maxEmbedTextBytes {
			return nil, embedTooLong("input", len(s))
		}
		return []*inferencev1.EmbedInput{text(s)}, nil
	case '[':
	default:
		return nil, wrong
	}
	var items []jsontext.Value
	if unmarshal(raw, &items) != nil {
		return nil, wrong
	}
	if len(items) == 0 {
		return nil, invalid("input", "input must not be empty")
	}
	if len(items) > maxEmbedArray {
		return nil, invalid("input", "input holds at most %d items (inputs, or token ids of one input)", maxEmbedArray)
	}
	switch firstByte(items[0]) {
	case '"':
		var ss []string
		if unmarshal(raw, &ss) != nil {
			return nil, wrong
		}
		out := make([]*inferencev1.EmbedInput, len(ss))
		for i, s := range ss {
			if s == "" {
				return nil, invalid(fmt.Sprintf("input[%d]", i), "input[%d] must not be empty", i)
			}
			if len(s) > maxEmbedTextBytes {
				return nil, embedTooLong(fmt.Sprintf("input[%d]", i), len(s))
			}
			out[i] = text(s)
		}
		return out, nil
	case '[':
		var arrays [][]int64
		if unmarshal(raw, &arrays) != nil || tokenNull(raw) {
			return nil, wrong
		}
		out := make([]*inferencev1.EmbedInput, len(arrays))
		for i, ids := range arrays {
			if len(ids) == 0 {
				return nil, invalid(fmt.Sprintf("input[%d]", i), "input[%d] must not be empty", i)
			}
			if len(ids) > maxEmbedArray {
				return nil, invalid(fmt.Sprintf("input[%d]", i), "input[%d] holds at most %d token ids", i, maxEmbedArray)
			}
			if j := negativeToken(ids); j >= 0 {
				at := fmt.Sprintf("input[%d][%d]", i, j)
				return nil, invalid(at, "%s: token id %d is negative", at, ids[j])
			}
			out[i] = tokens(ids)
		}
		return out, nil
	}
	var ids []int64
	if unmarshal(raw, &ids) != nil || tokenNull(raw) {
		return nil, wrong
	}
	if j := negativeToken(ids); j >= 0 {
		at := fmt.Sprintf("input[%d]", j)
		return nil, invalid(at, "%s: token id %d is negative", at, ids[j])
	}
	return []*inferencev1.EmbedInput{tokens(ids)}, nil
}

// negativeToken is the index of the first negative token id in ids, or -1.
// Token ids index a vocabulary: OpenAI refuses a negative one.
func negativeToken(ids []int64) int {
	for j, id := range ids {
		if id < 0 {
			return j
		}
	}
	return -1
}

// tokenNull reports whether a token-id input that decoded cleanly held a
// null, which encoding/json decodes into an int64 as 0 without complaint.
// Such an input holds only numbers, brackets and nulls (a string would not
// have decoded), so looking for the bytes is exact.
func tokenNull(raw jsontext.Value) bool {
	return bytes.Contains(raw, []byte("null"))
}
