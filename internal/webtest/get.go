// Package webtest holds HTTP helpers for tests that call a started
// gateway or central plane as an outside client would.
package webtest

import (
	"io"
	"net/http"
	"testing"
)

// Get sends a GET to url, with "Authorization: Bearer token" unless token
// is empty, and returns the status, headers and body. It fails the test
// when the request cannot be made or the body cannot be read.
func Get(tb testing.TB, url, token string) (int, http.Header, []byte) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp.StatusCode, resp.Header, body
}
