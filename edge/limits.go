package edge

import (
	"net/http"
)

// limitHeaders sets the x-ratelimit-* headers of a limited key: as its
// admission left them, or, on a response that was not admitted (a bad
// request, a policy denial), as they are now; so every response of a
// limited key carries them.
// They are set once: the values do not change after the admission.
func (s *Server) limitHeaders(w http.ResponseWriter, rc *requestContext) {
	if rc.limitHeaders {
		return
	}
	rc.limitHeaders = true
	if st, ok := rc.call.RateLimit(); ok {
		st.SetHeaders(w.Header())
	}
}
