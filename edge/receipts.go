package edge

import "net/http"

// getReceipt serves GET /v1/receipts/{id}: the receipt JSON of a recorded
// request of the key's tenant (how a stream's receipt is fetched: its
// headers went before its event was recorded); 404 not_found for any other
// id. Like GET /v1/responses/{id} it counts against the key's RPM, asks no
// policy and is audited (endpoint /v1/receipts), with a receipt of its own.
func (s *Server) getReceipt(w http.ResponseWriter, r *http.Request, rc *requestContext) {
	if err := rc.call.AdmitLookup(r.Context()); err != nil {
		s.refuse(w, r, rc, err)
		return
	}
	doc, err := rc.call.LoadReceipt(r.PathValue("id"))
	if err != nil {
		s.refuse(w, r, rc, err)
		return
	}
	s.respond(w, r, rc, http.StatusOK, doc)
}
