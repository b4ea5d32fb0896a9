package edge

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"net/http"

	"github.com/go-json-experiment/json/jsontext"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/policy"
)

// maxEmbedArray bounds every array of an embeddings input, as OpenAI's
// limits do ("any array must be 2048 dimensions or less"): at most 2048
// inputs, and at most 2048 token ids in one token-id array.
const maxEmbedArray = 2048

// embeddings serves POST /v1/embeddings.
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request, rc *requestContext) {
	if !s.readBody(w, r, rc) {
		return
	}
	req, b64, aerr := decodeEmbeddings(rc.body, rc.id)
	if aerr != nil {
		s.respondError(w, r, rc, aerr)
		return
	}
	rc.model = req.GetModel()
	in := policy.Input{Key: rc.principal, ApplianceID: s.cfg.ApplianceID, Time: rc.received, Request: policy.Request{
		ID: rc.id, Endpoint: policy.EndpointEmbeddings, Model: rc.model,
	}}
	if _, ok := s.decide(w, r, rc, in); !ok {
		return
	}
	if !s.admit(w, r, rc, embedReserve(rc, req)) {
		return
	}
	resp, err := s.cfg.Inference.Embed(r.Context(), req)
	if err == nil {
		err = finiteEmbeddings(resp)
	}
	if err != nil {
		s.fail(w, r, rc, "embed", err)
		return
	}
	out := embeddingsResponse{Object: "list", Model: req.GetModel(), Data: make([]embeddingItem, len(resp.GetEmbeddings()))}
	for i, e := range resp.GetEmbeddings() {
		item := embeddingItem{Object: "embedding", Index: i, Embedding: e.GetValues()}
		if b64 {
			item.Embedding = encodeFloat32s(e.GetValues())
		}
		out.Data[i] = item
	}
	out.Usage = embeddingsUsage{PromptTokens: resp.GetUsage().GetPromptTokens(), TotalTokens: resp.GetUsage().GetPromptTokens()}
	rc.promptTokens = out.Usage.PromptTokens
	s.respondUsed(w, r, rc, rc.promptTokens, mustMarshal(out))
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
	var in embeddingsRequest
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
		case "float":
		case "base64":
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

// finiteEmbeddings refuses an engine's answer holding a NaN or an
// infinity: JSON has no such number, and no client could use one. It is
// a broken engine answer, 500 like any other, charged nothing.
func finiteEmbeddings(resp *inferencev1.EmbedResponse) error {
	for i, e := range resp.GetEmbeddings() {
		for j, v := range e.GetValues() {
			if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
				return status.Errorf(codes.Internal, "engine returned a non-finite value (%v) at embedding %d, dimension %d", v, i, j)
			}
		}
	}
	return nil
}

// embedSpecialTokens is what an embeddings request reserves per input
// for the special tokens a model server adds to it: vLLM adds them by
// default (add_special_tokens), one or two on most models (BOS, EOS;
// [CLS] and [SEP] on BERT-style ones), so that an input of one byte
// counts three tokens. 16 leaves room for models that add more.
const embedSpecialTokens = 16

// embedReserve over-estimates an embeddings request's tokens for the TPD
// reservation: one per byte of text and one per token id (no tokenizer
// yields more tokens than bytes), plus embedSpecialTokens per input. The
// real count is settled afterwards.
func embedReserve(rc *requestContext, req *inferencev1.EmbedRequest) int64 {
	if rc.principal.TPD <= 0 {
		return 0
	}
	var n int64
	for _, in := range req.GetInputs() {
		n += int64(len(in.GetText())+len(in.GetTokens().GetIds())) + embedSpecialTokens
	}
	return n
}
