// Package rest serves the central plane's audit API over HTTP: grpc-gateway
// translates GET /v1/tenants/{tenant_id}/audit/heads, .../audit/proof and
// .../audit/forks into calls to the AuditQueryService over a gRPC client connection, so
// every request passes the gRPC server's interceptors (audit token,
// protovalidate). The token, and the tenant of the path, are also checked
// here, before the gateway reads the query, so that no query is refused
// ahead of the token. Responses are compact JSON with the proto field names and
// integers as numbers; errors use the spec's envelope. The OpenAPI
// document is served at /v1/openapi.json, and the health routes
// (WithHealth) at /healthz and /livez.
package rest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/tollgate-dev/tollgate/central/apierr"
	"github.com/tollgate-dev/tollgate/central/auth"
	centralv1 "github.com/tollgate-dev/tollgate/gen/tollgate/central/v1"
	"github.com/tollgate-dev/tollgate/internal/urlpath"
)

// OpenAPIPath is where the OpenAPI document is served.
const OpenAPIPath = "/v1/openapi.json"

// Handler returns the REST handler, calling the AuditQueryService over conn
// (a connection dialed to the gRPC server, not the service itself, so that
// interceptors run). tokens are the gRPC server's audit tokens.
func Handler(ctx context.Context, conn *grpc.ClientConn, tokens *auth.Tokens, logger *slog.Logger, opts ...Option) (http.Handler, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if tokens == nil {
		return nil, errors.New("rest: audit tokens are required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	g := &gate{tokens: tokens}
	gw := runtime.NewServeMux(
		// The token, then the tenant of the path, before the route's
		// handler parses the query (see gate).
		runtime.WithMiddlewares(g.middleware),
		runtime.WithMarshalerOption(runtime.MIMEWildcard, newMarshaler()),
		runtime.WithErrorHandler(errorHandler(logger)),
		runtime.WithRoutingErrorHandler(routingErrorHandler),
		// The query service reads the token and nothing else a client
		// sends. The gateway always forwards Authorization as the
		// authorization metadata; no other header becomes metadata
		// (by default grpc-gateway forwards Cookie, User-Agent and the
		// other standard headers as grpcgateway-*).
		runtime.WithIncomingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithMetadata(func(_ context.Context, r *http.Request) metadata.MD {
			return metadata.Pairs("x-request-id", RequestID(r.Context()))
		}),
		runtime.WithDisableHTTPMethodOverride(),
		// A POST with a form content type is not served as a GET of
		// the same route: every method but GET is 405, and the
		// fallback would parse the query before the token.
		runtime.WithDisablePathLengthFallback(),
		// The gRPC server's metadata stays internal: no Grpc-Metadata-*
		// headers or trailers in REST responses.
		runtime.WithOutgoingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithOutgoingTrailerMatcher(func(string) (string, bool) { return "", false }),
	)
	g.mux = gw
	if err := centralv1.RegisterAuditQueryServiceHandler(ctx, gw, conn); err != nil {
		return nil, fmt.Errorf("rest: register gateway: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(OpenAPIPath, serveOpenAPI)
	if o.health != nil {
		mux.HandleFunc(HealthzPath, o.health.serve)
		mux.HandleFunc(LivezPath, o.health.serve)
	}
	mux.Handle("/", gw)
	return withRequestID(bodiesUnread(withoutGRPCHeaders(canonicalOnly(mux)))), nil
}

// unreadBodyGrace is how long the rest of a request body may take to
// arrive once the answer is on its way (see bodiesUnread).
const unreadBodyGrace = time.Second

// bodiesUnread prepares every request that carries a body: no route of
// the API reads one (all are GETs), and net/http waits for an unread body
// with no deadline, before answering and again before closing, so a
// client that announces a body and stalls it, token or none, would hold
// its connection for ever. Such a request is answered as usual with
// Connection: close, and the rest of its body must arrive within
// unreadBodyGrace (net/http reads it after the answer); a body already
// sent is read at once. The appliance
// gateway does the same (edge.Server).
func bodiesUnread(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 {
			w.Header().Set("Connection", "close")
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(unreadBodyGrace))
			// The generated handlers drain a GET's body before calling
			// the service: they are given none.
			r = r.WithContext(r.Context())
			r.Body = http.NoBody
		}
		next.ServeHTTP(w, r)
	})
}

// canonicalOnly answers a path with empty, '.' or '..' segments, and any
// CONNECT, 404 not_found in the envelope, before the token is looked at, as any other
// unknown path (the gateway's routing comes before the gRPC call).
// http.ServeMux would answer a 307 to the cleaned path, in HTML, and the
// cleaned path may be another route (/v1/tenants//audit/heads) or another
// tenant's (/v1/tenants/acme/../beta/...): a client sending such a path
// has built its URL wrong, and is told so. The appliance gateway has the
// same rule (edge.Server).
func canonicalOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect {
			// http.ServeMux answers CONNECT (a host, not a path) with
			// a plain-text 404 before any pattern.
			writeError(w, r, http.StatusNotFound, apierr.ReasonNotFound, apierr.TypeOf(http.StatusNotFound),
				"no route CONNECT "+r.Host+": the API is not a proxy")
			return
		}
		if !urlpath.Canonical(r.URL.EscapedPath()) {
			writeError(w, r, http.StatusNotFound, apierr.ReasonNotFound, apierr.TypeOf(http.StatusNotFound),
				"no route "+r.URL.EscapedPath()+": the path is not canonical (empty, '.' or '..' segments)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// clientHeaders are request headers grpc-gateway turns into gRPC call
// settings whatever its options say: Grpc-Timeout becomes the call's
// deadline (and a malformed one a 400 quoting gRPC), X-Forwarded-For and
// X-Forwarded-Host the metadata of the same names. The REST API is plain
// HTTP; a client sets none of these. Without them, the gateway derives
// x-forwarded-* from the connection.
var clientHeaders = []string{"Grpc-Timeout", "X-Forwarded-For", "X-Forwarded-Host"}

// withoutGRPCHeaders drops clientHeaders from every request, so that
// "Grpc-Timeout: 1n" cannot turn a request (with or without a token)
// into a 503 and an error log line, a false outage signal. A handler does
// not modify its request: one that has such a header is cloned.
func withoutGRPCHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, h := range clientHeaders {
			if _, ok := r.Header[h]; ok {
				r = r.Clone(r.Context())
				for _, h := range clientHeaders {
					r.Header.Del(h)
				}
				break
			}
		}
		next.ServeHTTP(w, r)
	})
}

// serveOpenAPI serves the document to GET (and HEAD); another method is
// 405 in the envelope, as on the API's routes, not the gateway's 404.
func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, r, http.StatusMethodNotAllowed, apierr.ReasonMethodNotAllowed, apierr.TypeOf(http.StatusMethodNotAllowed),
			"method "+r.Method+" is not allowed on "+r.URL.Path)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(centralv1.OpenAPI)
}
