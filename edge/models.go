package edge

import (
	"net/http"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
)

// listModels serves GET /v1/models: the loaded models the key may use.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request, rc *requestContext) {
	if !s.admit(w, r, rc, 0) {
		return
	}
	models, ok := s.allowedModels(w, r, rc)
	if !ok {
		return
	}
	out := modelList{Object: "list", Data: make([]modelCard, 0, len(models))}
	for _, m := range models {
		out.Data = append(out.Data, card(m))
	}
	s.respond(w, r, rc, http.StatusOK, mustMarshal(out))
}

// getModel serves GET /v1/models/{model}. A model the key may not use is
// 404, as OpenAI answers for models an account cannot see, so a key cannot
// probe what else is loaded.
func (s *Server) getModel(w http.ResponseWriter, r *http.Request, rc *requestContext) {
	id := r.PathValue("model")
	if !s.admit(w, r, rc, 0) {
		return
	}
	models, ok := s.allowedModels(w, r, rc)
	if !ok {
		return
	}
	for _, m := range models {
		if m.GetId() == id {
			rc.model = id
			s.respond(w, r, rc, http.StatusOK, mustMarshal(card(m)))
			return
		}
	}
	s.respondError(w, r, rc, notFound("model %q does not exist or this key may not use it", id))
}

// allowedModels lists the loaded models (sorted by id by the service) that
// the key allows.
func (s *Server) allowedModels(w http.ResponseWriter, r *http.Request, rc *requestContext) ([]*inferencev1.Model, bool) {
	resp, err := s.cfg.Inference.ListModels(r.Context(), &inferencev1.ListModelsRequest{})
	if err != nil {
		s.fail(w, r, rc, "list models", err)
		return nil, false
	}
	var out []*inferencev1.Model
	for _, m := range resp.GetModels() {
		if rc.principal.AllowsModel(m.GetId()) {
			out = append(out, m)
		}
	}
	return out, true
}

func card(m *inferencev1.Model) modelCard {
	return modelCard{ID: m.GetId(), Object: "model", Created: m.GetCreated(), OwnedBy: m.GetOwnedBy()}
}
