package builtin

import (
	"context"
	"hash/fnv"
	"math"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/inference"
)

// EmbedDimensions is the size of builtin/embed vectors.
const EmbedDimensions = 256

// Embed implements inference.Engine for builtin/embed.
func (e *Engine) Embed(_ context.Context, req *inferencev1.EmbedRequest) (*inferencev1.EmbedResponse, error) {
	switch req.GetModel() {
	case EmbedModel:
	case EchoModel:
		return nil, inference.WrongKind(req.GetModel(), inferencev1.ModelKind_MODEL_KIND_EMBEDDING)
	default:
		return nil, inference.ModelNotLoaded(req.GetModel())
	}
	dims := int(req.GetDimensions())
	if dims == 0 {
		dims = EmbedDimensions
	}
	if dims > EmbedDimensions {
		return nil, status.Errorf(codes.InvalidArgument, "dimensions %d exceeds %d, the size of %s", dims, EmbedDimensions, EmbedModel)
	}
	resp := &inferencev1.EmbedResponse{
		Embeddings: make([]*inferencev1.Embedding, len(req.GetInputs())),
		Usage:      &inferencev1.Usage{},
	}
	for i, in := range req.GetInputs() {
		text, tokens := inputText(in)
		resp.Usage.PromptTokens += tokens
		resp.Embeddings[i] = &inferencev1.Embedding{Values: Vector(text, dims)}
	}
	return resp, nil
}

// inputText is the text an input is embedded as, and its token count. Token
// ids are embedded as their decimal numbers separated by spaces and count one
// token each.
func inputText(in *inferencev1.EmbedInput) (string, int64) {
	if t, ok := in.GetInput().(*inferencev1.EmbedInput_Text); ok {
		return t.Text, CountTokens(t.Text)
	}
	ids := in.GetTokens().GetIds()
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatInt(id, 10))
	}
	return b.String(), int64(len(ids))
}

// Vector embeds text: every character 3-gram of the lowercased text (the
// whole text when it is shorter) is hashed with 32-bit FNV-1a into bucket
// hash mod 256 with sign + when bit 31 of the hash is clear, - otherwise.
// The first dims buckets are then L2-normalised. Empty text is the zero
// vector.
func Vector(text string, dims int) []float32 {
	var acc [EmbedDimensions]float64
	runes := []rune(strings.ToLower(text))
	gram := func(g []rune) {
		h := fnv.New32a()
		_, _ = h.Write([]byte(string(g)))
		sum := h.Sum32()
		if sum&(1<<31) == 0 {
			acc[sum%EmbedDimensions]++
		} else {
			acc[sum%EmbedDimensions]--
		}
	}
	switch {
	case len(runes) == 0:
	case len(runes) < 3:
		gram(runes)
	default:
		for i := 0; i+3 <= len(runes); i++ {
			gram(runes[i : i+3])
		}
	}
	var norm float64
	for _, v := range acc[:dims] {
		norm += v * v
	}
	norm = math.Sqrt(norm)
	out := make([]float32, dims)
	if norm == 0 {
		return out
	}
	for i, v := range acc[:dims] {
		out[i] = float32(v / norm)
	}
	return out
}
