package webtest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Chat sends one chat completion of content to the builtin echo model
// through the gateway at base, with key, and returns its request id. It
// fails the test unless the gateway answers 200 with an X-Request-Id.
func Chat(tb testing.TB, base, key, content string) string {
	tb.Helper()
	msg, err := json.Marshal(content)
	if err != nil {
		tb.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, base+"/v1/chat/completions",
		strings.NewReader(`{"model":"builtin/echo","messages":[{"role":"user","content":`+string(msg)+`}]}`))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	requestID := resp.Header.Get("X-Request-Id")
	if resp.StatusCode != http.StatusOK || requestID == "" {
		tb.Fatalf("chat: %d, request id %q", resp.StatusCode, requestID)
	}
	return requestID
}
