package edge

import (
	"net/http"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/policy"
)

// listModels serves GET /v1/models: the loaded models the key may use.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request, rc *requestContext) {
	if !s.decideModels(w, r, rc) || !s.admit(w, r, rc, 0) {
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
//
// A model the key may not use (or an id no model can have) is answered
// 404 before the policy, unlike a chat or embeddings request for it (which
// the policy's scope stage denies with a decision id): a 403 would tell
// the key that the model exists. The policy decides on the others, with
// the id as request.model.
func (s *Server) getModel(w http.ResponseWriter, r *http.Request, rc *requestContext) {
	id := r.PathValue("model")
	notHere := notFound("model %q does not exist or this key may not use it", id)
	if !validModelID(id) || !rc.principal.AllowsModel(id) {
		s.respondError(w, r, rc, notHere)
		return
	}
	rc.model = id
	if !s.decideModels(w, r, rc) || !s.admit(w, r, rc, 0) {
		return
	}
	models, ok := s.allowedModels(w, r, rc)
	if !ok {
		return
	}
	for _, m := range models {
		if m.GetId() == id {
			s.respond(w, r, rc, http.StatusOK, mustMarshal(card(m)))
			return
		}
	}
	s.respondError(w, r, rc, notHere)
}

// decideModels asks the policy about a model listing (rc.model empty) or
// lookup (rc.model the id asked for), as every gateway request is asked.
// A denial is answered here: 403 with the decision id.
func (s *Server) decideModels(w http.ResponseWriter, r *http.Request, rc *requestContext) bool {
	_, ok := s.decide(w, r, rc, policy.Input{Key: rc.principal, ApplianceID: s.cfg.ApplianceID, Time: rc.received, Request: policy.Request{
		ID: rc.id, Endpoint: policy.EndpointModels, Model: rc.model,
	}})
	return ok
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
