package inference

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
)

// Service implements inferencev1.InferenceServiceServer over a fixed set of
// engines, one per namespace.
type Service struct {
	inferencev1.UnimplementedInferenceServiceServer
	engines map[string]Engine
}

// NewService routes each namespace to its engine. Two engines with the same
// namespace are refused: which would serve it is not for the service to
// guess, and the engines come from configuration (flags naming model
// servers), where a repeat is a mistake to report, not a crash.
func NewService(engines ...Engine) (*Service, error) {
	s := &Service{engines: make(map[string]Engine, len(engines))}
	for _, e := range engines {
		if _, dup := s.engines[e.Namespace()]; dup {
			return nil, fmt.Errorf("inference: two engines serve the namespace %q", e.Namespace())
		}
		s.engines[e.Namespace()] = e
	}
	return s, nil
}

// ListModels returns every loaded model, sorted by id.
func (s *Service) ListModels(context.Context, *inferencev1.ListModelsRequest) (*inferencev1.ListModelsResponse, error) {
	var models []*inferencev1.Model
	for _, e := range s.engines {
		models = append(models, e.Models()...)
	}
	sort.Slice(models, func(i, j int) bool { return models[i].GetId() < models[j].GetId() })
	return &inferencev1.ListModelsResponse{Models: models}, nil
}

// Model returns the loaded model of that id, as ListModels would list it,
// from its namespace's engine alone: what the pipeline reads of a model
// on every chat request (its output limit and context length) costs a
// map lookup, not a listing of every engine's models.
func (s *Service) Model(id string) (*inferencev1.Model, bool) {
	e, err := s.route(id)
	if err != nil {
		return nil, false
	}
	if f, ok := e.(ModelFinder); ok {
		return f.Model(id)
	}
	for _, m := range e.Models() {
		if m.GetId() == id {
			return m, true
		}
	}
	return nil, false
}

// ChatCompletion streams the engine's reply.
func (s *Service) ChatCompletion(req *inferencev1.ChatCompletionRequest, stream grpc.ServerStreamingServer[inferencev1.ChatCompletionResponse]) error {
	e, err := s.route(req.GetModel())
	if err != nil {
		return err
	}
	return e.ChatCompletion(stream.Context(), req, stream.Send)
}

// Embed returns the engine's embeddings.
func (s *Service) Embed(ctx context.Context, req *inferencev1.EmbedRequest) (*inferencev1.EmbedResponse, error) {
	e, err := s.route(req.GetModel())
	if err != nil {
		return nil, err
	}
	return e.Embed(ctx, req)
}

// CountTokens returns the engine's exact prompt token count.
func (s *Service) CountTokens(ctx context.Context, req *inferencev1.CountTokensRequest) (*inferencev1.CountTokensResponse, error) {
	e, err := s.route(req.GetModel())
	if err != nil {
		return nil, err
	}
	return e.CountTokens(ctx, req)
}

func (s *Service) route(model string) (Engine, error) {
	ns, _, ok := strings.Cut(model, "/")
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "model %q is not of the form <namespace>/<model_name>", model)
	}
	e, ok := s.engines[ns]
	if !ok {
		return nil, ModelNotLoaded(model)
	}
	return e, nil
}

// WrongKind is the error for a model asked to do what its kind does not:
// embeddings of a chat model, a completion of an embedding model.
func WrongKind(model string, want inferencev1.ModelKind) error {
	what := "chat completions"
	if want == inferencev1.ModelKind_MODEL_KIND_EMBEDDING {
		what = "embeddings"
	}
	return status.Errorf(codes.InvalidArgument, "model %q does not serve %s", model, what)
}

// ModelNotLoaded is the error for a well-formed model id that no engine has
// loaded: NotFound, which the edge reports as 503 model_unavailable.
func ModelNotLoaded(model string) error {
	return status.Errorf(codes.NotFound, "model %q is not loaded on this appliance", model)
}
