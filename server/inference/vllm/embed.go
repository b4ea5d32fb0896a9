package vllm

import (
	"context"
	"encoding/json"

	"github.com/go-json-experiment/json/jsontext"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/openai"
)

// Embed implements inference.Engine with the server's /v1/embeddings.
// Inputs are all text or all token ids, as OpenAI's input is.
func (e *Engine) Embed(ctx context.Context, req *inferencev1.EmbedRequest) (*inferencev1.EmbedResponse, error) {
	model, err := e.upstreamModel(req.GetModel(), inferencev1.ModelKind_MODEL_KIND_EMBEDDING)
	if err != nil {
		return nil, err
	}
	input, err := embedInput(req.GetInputs())
	if err != nil {
		return nil, err
	}
	out, err := e.embed(ctx, model, input, req)
	e.cfg.Metrics.observe(e.cfg.Namespace, "embeddings", err)
	return out, err
}

// encodingFloat is the encoding format the engine asks for: the contract's
// embeddings are float32 values.
var encodingFloat = ref(openai.EncodingFloat)

func (e *Engine) embed(ctx context.Context, model string, input jsontext.Value, req *inferencev1.EmbedRequest) (*inferencev1.EmbedResponse, error) {
	body := openai.EmbeddingRequest{Model: model, Input: input, EncodingFormat: encodingFloat}
	if d := req.GetDimensions(); d != 0 {
		body.Dimensions = ref(int64(d))
	}
	b, err := marshal(body)
	if err != nil {
		return nil, err
	}
	resp, err := e.post(ctx, "embeddings", e.base+"/v1/embeddings", b, req.GetModel(), req.GetRequestId())
	if err != nil {
		return nil, err
	}
	var out openai.EmbeddingResponse[[]float32]
	if err := decodeBody(resp, maxEmbedBytes, &out); err != nil {
		return nil, err
	}
	n := len(req.GetInputs())
	if len(out.Data) != n || out.Usage == nil {
		return nil, status.Errorf(codes.Internal, "vllm: /v1/embeddings answered %d embeddings for %d inputs, usage %v", len(out.Data), n, out.Usage != nil)
	}
	embs := make([]*inferencev1.Embedding, n)
	for _, d := range out.Data {
		if d.Index < 0 || d.Index >= n || embs[d.Index] != nil {
			return nil, status.Errorf(codes.Internal, "vllm: /v1/embeddings answered index %d twice or out of range", d.Index)
		}
		embs[d.Index] = &inferencev1.Embedding{Values: d.Embedding}
	}
	return &inferencev1.EmbedResponse{
		Embeddings: embs,
		Usage:      &inferencev1.Usage{PromptTokens: out.Usage.PromptTokens},
	}, nil
}

// embedInput is the request's input: a list of strings, or of token id
// lists.
func embedInput(in []*inferencev1.EmbedInput) (jsontext.Value, error) {
	if _, ok := in[0].GetInput().(*inferencev1.EmbedInput_Text); ok {
		texts := make([]string, len(in))
		for i, x := range in {
			t, ok := x.GetInput().(*inferencev1.EmbedInput_Text)
			if !ok {
				return nil, mixedInput()
			}
			texts[i] = t.Text
		}
		return mustJSON(texts), nil
	}
	ids := make([][]int64, len(in))
	for i, x := range in {
		t, ok := x.GetInput().(*inferencev1.EmbedInput_Tokens)
		if !ok {
			return nil, mixedInput()
		}
		ids[i] = t.Tokens.GetIds()
		if ids[i] == nil {
			ids[i] = []int64{}
		}
	}
	return mustJSON(ids), nil
}

func mixedInput() error {
	return status.Error(codes.InvalidArgument, "inputs must be all text or all token ids")
}

// mustJSON encodes a value the engine made, which cannot fail.
func mustJSON(v any) jsontext.Value {
	b, err := json.Marshal(v)
	if err != nil {
		panic("vllm: marshal: " + err.Error()) // only the engine's own values are marshalled
	}
	return b
}
