package h1server

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate-dev/tollgate/internal/openai"
)

// errorReply is the whole response to a request the server answers
// itself (malformed, oversized headers, an unsupported version or
// expectation), then closing the connection: the gateway's error envelope
// (docs/gateway-api.md, "Errors"), with no request id, since no handler
// saw the request.
func errorReply(status int, message string) []byte {
	code := "invalid_request"
	if status == http.StatusRequestHeaderFieldsTooLarge {
		code = "request_too_large"
	}
	body, _ := json.Marshal(openai.ErrorResponse{Error: &openai.APIError{
		Code:    code,
		Message: message,
		Type:    "invalid_request_error",
	}})
	b := make([]byte, 0, 256+len(body))
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(status)...)
	b = append(b, "\r\nContent-Type: application/json\r\nConnection: close\r\n"...)
	b = append(b, dateLine(time.Now())...)
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	return append(b, body...)
}
