// Package webtest holds HTTP helpers for tests that call a started
// gateway or central plane as an outside client would.
package webtest

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// client bounds every request, so that a server that accepts a connection
// and never answers fails the test instead of hanging it; the bound is a
// guard, not a timing assertion. A redirect is returned as the answer it
// is, not followed: neither server should send one.
var client = &http.Client{
	Timeout:       time.Minute,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// Get sends a GET to url, with "Authorization: Bearer token" unless token
// is empty, and returns the status, headers and body. It fails the test
// when the request cannot be made or the body cannot be read.
func Get(tb testing.TB, url, token string) (int, http.Header, []byte) {
	tb.Helper()
	return Do(tb, http.MethodGet, url, token)
}

// Do is Get with another method, and no body.
func Do(tb testing.TB, method, url, token string) (int, http.Header, []byte) {
	tb.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return Send(tb, req)
}

// Send sends req as it is (headers of several values included) and
// returns the status, headers and body, as Do.
func Send(tb testing.TB, req *http.Request) (int, http.Header, []byte) {
	tb.Helper()
	resp, err := client.Do(req)
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
