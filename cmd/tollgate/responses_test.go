package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/server/responsestore"
)

// TestDevStoredResponsesSurviveRestart stores a response through `tollgate
// dev`, stops it, starts it again on the same data directory, and finds
// the response there: GET returns the same bytes, and a continuation with
// previous_response_id carries the stored conversation (the engine is
// given more than the new input alone).
func TestDevStoredResponsesSurviveRestart(t *testing.T) {
	data := t.TempDir()
	var key, id string
	var stored []byte
	withDev(t, data, func(base, demoKey string) {
		key = demoKey
		st, body := postJSON(t, base+"/v1/responses", key, `{"model":"builtin/echo","input":"remember the word heliotrope","store":true}`)
		if st != http.StatusOK {
			t.Fatalf("store: %d %s", st, body)
		}
		id = responseField(t, body).ID
		stored = body
	})
	if key == "" {
		t.Fatal("no demo key shown")
	}
	if _, err := os.Stat(filepath.Join(data, responsestore.FileName)); err != nil {
		t.Fatalf("no stored responses file in the data directory: %v", err)
	}
	withDev(t, data, func(base, _ string) {
		st, got := getWithKey(t, base+"/v1/responses/"+id, key)
		if st != http.StatusOK || !bytes.Equal(got, stored) {
			t.Fatalf("GET after restart: %d %s\nwant %s", st, got, stored)
		}
		st, alone := postJSON(t, base+"/v1/responses", key, `{"model":"builtin/echo","input":"which word?","store":false}`)
		if st != http.StatusOK {
			t.Fatalf("fresh request: %d %s", st, alone)
		}
		st, next := postJSON(t, base+"/v1/responses", key, `{"model":"builtin/echo","input":"which word?","previous_response_id":"`+id+`"}`)
		if st != http.StatusOK {
			t.Fatalf("continuation after restart: %d %s", st, next)
		}
		a, n := responseField(t, alone), responseField(t, next)
		if n.PreviousResponseID != id || n.Usage.InputTokens <= a.Usage.InputTokens {
			t.Fatalf("continuation: previous %q (want %s), %d input tokens (the input alone is %d): the stored conversation was not carried",
				n.PreviousResponseID, id, n.Usage.InputTokens, a.Usage.InputTokens)
		}
	})
}

// withDev runs `tollgate dev` on data until it is up, calls f with its
// base URL and the demo key (empty when it was shown by an earlier
// start), then stops it and waits for its exit.
func withDev(t *testing.T, data string, f func(base, key string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := newOutputs()
	out, errOut := o.buffer(), o.buffer()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"dev", "--data", data, "--gateway-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0",
			"--central-addr", "127.0.0.1:0", "--log-level", "error"}, out, errOut)
	}()
	up := regexp.MustCompile(`Base URL:\s+(http://\S+)/v1(?s:.*)(Demo key:\s+(tgk_\S+)|was shown once when)`)
	var m []string
	o.waitFor(t, "dev up", func() bool {
		select {
		case code := <-done:
			t.Fatalf("dev exited %d before it was up: %s", code, errOut.String())
		default:
		}
		m = up.FindStringSubmatch(out.String())
		return m != nil
	})
	f(m[1], m[3])
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("dev exited %d: %s", code, errOut.String())
	}
}

type responseDoc struct {
	ID                 string `json:"id"`
	PreviousResponseID string `json:"previous_response_id"`
	Usage              struct {
		InputTokens int64 `json:"input_tokens"`
	} `json:"usage"`
}

func responseField(t *testing.T, body []byte) responseDoc {
	t.Helper()
	var d responseDoc
	if err := json.Unmarshal(body, &d); err != nil || !strings.HasPrefix(d.ID, "resp_") {
		t.Fatalf("response %s: %v", body, err)
	}
	return d
}

func postJSON(t *testing.T, url, key, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	return do(t, req)
}

func getWithKey(t *testing.T, url, key string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	st, body := do(t, req)
	return st, body
}

func do(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}
