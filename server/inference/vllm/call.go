package vllm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/internal/openai"
	"github.com/tollgate-dev/tollgate/internal/readsized"
	"github.com/tollgate-dev/tollgate/internal/tracing"
	"github.com/tollgate-dev/tollgate/server/inference"
)

// post sends body, JSON, to url and returns the response of a 200; any
// other answer is turned into the call's error (upstreamError). requestID,
// when set, is sent as X-Request-Id, which vLLM takes as its own request
// id, so that its logs and the gateway's name a request alike.
func (e *Engine) post(ctx context.Context, call, url string, body []byte, model, requestID string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, status.Errorf(codes.Internal, "vllm: %v", err)
	}
	req.Header["Content-Type"] = headerJSON
	if requestID != "" {
		req.Header["X-Request-Id"] = []string{requestID}
	}
	// The request's trace goes on to the model server (a vLLM started
	// with --otlp-traces-endpoint makes its spans children of ours).
	tracing.Inject(ctx, req.Header)
	return e.send(ctx, call, req, model)
}

// marshal is body's JSON, for the calls whose request encoding/json
// writes (a chat request writes its own: AppendJSON).
func marshal(body any) ([]byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, encodeError(err)
	}
	return b, nil
}

// encodeError is the call's error for a request body that could not be
// encoded: one the engine made, so a fault of the gateway's.
func encodeError(err error) error {
	return status.Errorf(codes.Internal, "vllm: encode request: %v", err)
}

// headerJSON is the value of Content-Type and Accept. The headers of the
// engine's requests are set as canonical keys to values made once (no
// canonicalising, no slice per header); nothing writes into a request's
// header values.
var headerJSON = []string{"application/json"}

func (e *Engine) send(ctx context.Context, call string, req *http.Request, model string) (*http.Response, error) {
	if e.auth != nil {
		req.Header["Authorization"] = e.auth
	}
	req.Header["Accept"] = headerJSON
	start := time.Now()
	var resp *http.Response
	var err error
	if e.rt != nil {
		resp, err = e.rt.RoundTrip(req)
	} else {
		resp, err = e.cfg.Client.Do(req)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		e.cfg.Logger.Warn("model server unreachable", "namespace", e.cfg.Namespace, "err", err)
		return nil, status.Errorf(codes.Unavailable, "the model server of %s is unreachable", e.cfg.Namespace)
	}
	e.cfg.Metrics.responded(e.cfg.Namespace, call, time.Since(start))
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	return nil, e.upstreamError(resp.StatusCode, raw, model)
}

// decodeBody decodes a 200's JSON body into out, reading at most limit
// bytes, and closes it.
func decodeBody(resp *http.Response, limit int64, out any) error {
	defer resp.Body.Close()
	raw, err := readsized.ReadAll(resp.Body, resp.ContentLength, limit)
	if err != nil {
		return status.Errorf(codes.Unavailable, "vllm: reading the model server's answer: %v", err)
	}
	if int64(len(raw)) > limit {
		return status.Errorf(codes.Internal, "vllm: the model server's answer exceeds %d bytes", limit)
	}
	if err := jsonv2.Unmarshal(raw, out); err != nil {
		return status.Errorf(codes.Internal, "vllm: the model server's answer is not the JSON expected: %v", err)
	}
	return nil
}

// upstreamError maps an answer other than 200 to the call's error:
//   - 400 and 422 (a request the server refuses: a prompt longer than the
//     model's context, a schema it cannot compile) are InvalidArgument
//     with the server's message, which the client sees;
//   - 404 for a model is NotFound (503 model_unavailable at the edge): the
//     server no longer serves it;
//   - 429 and 503 (the server is full or starting) are Unavailable;
//   - the rest (401/403: the gateway's API key is wrong; 5xx) is Internal,
//     logged with the server's message, which the client does not see.
func (e *Engine) upstreamError(code int, raw []byte, model string) error {
	msg := errorMessage(raw)
	switch {
	case code == http.StatusBadRequest || code == http.StatusUnprocessableEntity:
		if msg == "" {
			msg = "the model server refused the request"
		}
		return status.Error(codes.InvalidArgument, msg)
	case code == http.StatusNotFound && model != "":
		e.refreshSoon()
		return inference.ModelNotLoaded(model)
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		return status.Errorf(codes.Unavailable, "the model server of %s is busy or starting; retry later", e.cfg.Namespace)
	}
	e.cfg.Logger.Error("model server failed the call", "namespace", e.cfg.Namespace,
		"http_status", code, "message", msg)
	return status.Errorf(codes.Internal, "vllm: the model server answered %d: %s", code, msg)
}

// maxMessageBytes bounds a server's message passed on to a client.
const maxMessageBytes = 1024

// errorMessage is the message of a vLLM error body, or "".
func errorMessage(raw []byte) string {
	var body errorBody
	if json.Unmarshal(raw, &body) != nil {
		return ""
	}
	return errorText(body.Error, body.Detail)
}

// errorText is the message of a vLLM error: its error field (an object
// with a message, or a string), else a string detail; valid UTF-8, at
// most maxMessageBytes.
func errorText(errField json.RawMessage, detail any) string {
	var msg string
	var obj errorObject
	switch {
	case json.Unmarshal(errField, &obj) == nil && obj.Message != "":
		msg = obj.Message
	case json.Unmarshal(errField, &msg) == nil:
	default:
		if s, ok := detail.(string); ok {
			msg = s
		}
	}
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	if len(msg) > maxMessageBytes {
		cut := maxMessageBytes
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}

// refreshSoon re-reads the model list after the server said a listed
// model is gone, so that the next listing no longer offers it.
func (e *Engine) refreshSoon() {
	if !e.refreshing.CompareAndSwap(false, true) {
		return // one at a time
	}
	go func() {
		defer e.refreshing.Store(false)
		e.refreshLogged(context.Background())
	}()
}

// streamBroken is the error of a completion whose stream ended or failed
// after the server's 200.
func streamBroken(format string, args ...any) error {
	return status.Errorf(codes.Internal, "vllm: "+format, args...)
}

func frameError(err error) error {
	if errors.Is(err, openai.ErrEventTooLong) {
		return streamBroken("%v (%d bytes)", err, maxFrameBytes)
	}
	return streamBroken("reading the stream: %v", fmt.Sprint(err))
}
