package edge_test

import (
	"bufio"
	"context"
	"net/http"
	"testing"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/inference"
)

// floodEngine sends pieces until its send fails, then says that it has
// returned: a reply without end, which only the stream's end can stop.
type floodEngine struct{ returned chan error }

func (floodEngine) Namespace() string { return "gpu" }
func (floodEngine) Models() []*inferencev1.Model {
	return []*inferencev1.Model{{Id: "gpu/flood", Kind: inferencev1.ModelKind_MODEL_KIND_CHAT}}
}
func (e floodEngine) ChatCompletion(_ context.Context, _ *inferencev1.ChatCompletionRequest, send func(*inferencev1.ChatCompletionResponse) error) error {
	for {
		if err := send(&inferencev1.ChatCompletionResponse{Content: "more "}); err != nil {
			e.returned <- err
			return err
		}
	}
}
func (floodEngine) Embed(context.Context, *inferencev1.EmbedRequest) (*inferencev1.EmbedResponse, error) {
	return nil, inference.WrongKind("gpu/flood", inferencev1.ModelKind_MODEL_KIND_EMBEDDING)
}
func (floodEngine) CountTokens(context.Context, *inferencev1.CountTokensRequest) (*inferencev1.CountTokensResponse, error) {
	return &inferencev1.CountTokensResponse{PromptTokens: 1}, nil
}

// An in-process stream whose client goes away ends its engine, wherever
// the engine is when the request ends: the edge stops reading the reply
// (a write fails, or the request's context ends), and the engine's next
// send fails. Were the engine left waiting for a read that never comes,
// the test would time out.
func TestLocalStreamClientGoneEndsEngine(t *testing.T) {
	for _, path := range []string{chatPath, "/v1/completions", "/v1/responses"} {
		t.Run(path, func(t *testing.T) {
			e := floodEngine{returned: make(chan error, 1)}
			s := newStack(t, stackConfig{local: true, engines: []inference.Engine{e}})
			body := map[string]string{
				chatPath:          `{"model":"gpu/flood","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
				"/v1/completions": `{"model":"gpu/flood","stream":true,"prompt":"hi"}`,
				"/v1/responses":   `{"model":"gpu/flood","stream":true,"input":"hi"}`,
			}[path]
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resp, err := http.DefaultClient.Do(s.newRequest(t, http.MethodPost, path, keyAll, body).WithContext(ctx))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			br := bufio.NewReader(resp.Body)
			for i := range 3 {
				if _, err := readFrame(br); err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
			}
			cancel()
			resp.Body.Close()
			if err := <-e.returned; err == nil {
				t.Fatal("the engine's send never failed")
			}
		})
	}
}
