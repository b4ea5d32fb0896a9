package rest

import (
	"context"
	"net/http"

	"github.com/tollgate-dev/tollgate/internal/ids"
)

// RequestIDHeader carries the request id of every response.
const RequestIDHeader = "X-Request-Id"

type requestIDKey struct{}

// withRequestID gives every request an id, in its context and in the
// X-Request-Id response header.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := ids.NewRequest()
		w.Header().Set(RequestIDHeader, id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id)))
	})
}

// RequestID returns the id of the REST request ctx belongs to ("" outside
// one).
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}
