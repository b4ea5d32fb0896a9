package rest

import (
	"context"
	"crypto/rand"
	"net/http"
)

// RequestIDHeader carries the request id of every response.
const RequestIDHeader = "X-Request-Id"

type requestIDKey struct{}

// idAlphabet is Crockford-style lowercase base32, as the gateway's ids.
const idAlphabet = "0123456789abcdefghjkmnpqrstvwxyz"

// newRequestID returns req_ and 26 random base32 characters.
func newRequestID() string {
	var b [4 + 26]byte
	copy(b[:], "req_")
	_, _ = rand.Read(b[4:])
	for i := 4; i < len(b); i++ {
		b[i] = idAlphabet[b[i]&31]
	}
	return string(b[:])
}

// withRequestID gives every request an id, in its context and in the
// X-Request-Id response header.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := newRequestID()
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
