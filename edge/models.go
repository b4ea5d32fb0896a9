package edge

import (
	"net/http"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/openai"
)

// listModels serves GET /v1/models: the loaded models the key may use.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request, rc *requestContext) {
	models, ok := s.allowedModels(w, r, rc)
	if !ok {
		return
	}
	out := openai.ModelList{Object: openai.ObjectList, Data: make([]openai.Model, 0, len(models))}
	for _, m := range models {
		out.Data = append(out.Data, card(m))
	}
	s.respond(w, r, rc, http.StatusOK, mustMarshal(out))
}

// getModel serves GET /v1/models/{model}: the model, or 404 for one that
// does not exist or that the key may not use (pipeline.Call.LookupModel).
func (s *Server) getModel(w http.ResponseWriter, r *http.Request, rc *requestContext) {
	id := r.PathValue("model")
	if !validModelID(id) {
		s.respondError(w, r, rc, notFound("model %q does not exist or this key may not use it", id))
		return
	}
	m, err := rc.call.LookupModel(r.Context(), id)
	if err != nil {
		s.refuse(w, r, rc, err)
		return
	}
	s.respond(w, r, rc, http.StatusOK, mustMarshal(card(m)))
}

// allowedModels asks the policy and the limits about a model listing or
// lookup (rc.call.Model the id asked for), as every gateway request is
// asked, then lists the loaded models the key allows. A refusal is
// answered here.
func (s *Server) allowedModels(w http.ResponseWriter, r *http.Request, rc *requestContext) ([]*inferencev1.Model, bool) {
	if err := rc.call.DecideModels(r.Context()); err != nil {
		s.refuse(w, r, rc, err)
		return nil, false
	}
	if err := rc.call.Admit(r.Context(), 0); err != nil {
		s.refuse(w, r, rc, err)
		return nil, false
	}
	s.limitHeaders(w, rc)
	models, err := rc.call.Models(r.Context())
	if err != nil {
		s.refuse(w, r, rc, err)
		return nil, false
	}
	return models, true
}

func card(m *inferencev1.Model) openai.Model {
	return openai.Model{ID: m.GetId(), Object: openai.ObjectModel, Created: m.GetCreated(), OwnedBy: m.GetOwnedBy()}
}
