package edge

import (
	"net/http"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
)

// listModels serves GET /v1/models: the loaded models the key may use.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request, rc *requestContext) {
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
	if !validModelID(id) || !rc.call.Principal().AllowsModel(id) {
		s.respondError(w, r, rc, notHere)
		return
	}
	rc.call.Model = id
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

func card(m *inferencev1.Model) modelCard {
	return modelCard{ID: m.GetId(), Object: "model", Created: m.GetCreated(), OwnedBy: m.GetOwnedBy()}
}
