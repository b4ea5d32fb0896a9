package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/central/apierr"
)

// envelope is the spec's error envelope; members in this order.
type envelope struct {
	Error body `json:"error"`
}

type body struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Type      string `json:"type"`
	RequestID string `json:"request_id"`
}

// errorHandler writes a gRPC error as the envelope: error.code is the
// ErrorInfo reason when the service gave one, else follows the gRPC code.
func errorHandler(logger *slog.Logger) runtime.ErrorHandlerFunc {
	return func(ctx context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
		st := status.Convert(err)
		httpStatus, code, typ := apierr.HTTP(st)
		msg := st.Message()
		if httpStatus >= 500 {
			logger.ErrorContext(ctx, "central rest: request failed", "request_id", RequestID(r.Context()),
				"path", r.URL.Path, "code", st.Code().String(), "err", st.Message())
			switch st.Code() {
			case codes.Unavailable:
				// Its message names internal addresses and transport
				// errors: logged above, not sent.
				msg = "the audit query service is unavailable; retry later"
			case codes.DeadlineExceeded:
				// Not a failure of the plane's, which "internal error"
				// would say: the query ran out of time (its details are
				// logged, not sent).
				msg = "the query did not complete in time; retry later"
			default:
				msg = "internal error"
			}
		}
		writeError(w, r, httpStatus, code, typ, msg)
	}
}

// routingErrorHandler answers requests no route matched.
func routingErrorHandler(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, httpStatus int) {
	switch httpStatus {
	case http.StatusMethodNotAllowed:
		// Every route of the API is a GET; RFC 9110 requires the header.
		w.Header().Set("Allow", http.MethodGet)
		writeError(w, r, httpStatus, apierr.ReasonMethodNotAllowed, apierr.TypeOf(httpStatus), "method "+r.Method+" is not allowed on "+r.URL.Path)
	case http.StatusBadRequest:
		writeError(w, r, httpStatus, apierr.ReasonInvalidRequest, apierr.TypeOf(httpStatus), "malformed request path")
	default:
		writeError(w, r, http.StatusNotFound, apierr.ReasonNotFound, apierr.TypeOf(http.StatusNotFound), "no route "+r.URL.Path)
	}
}

func writeError(w http.ResponseWriter, r *http.Request, httpStatus int, code, typ, msg string) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(envelope{Error: body{Code: code, Message: msg, Type: typ, RequestID: RequestID(r.Context())}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(httpStatus)
	_, _ = w.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}
