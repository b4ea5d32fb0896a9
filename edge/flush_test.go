package edge_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/inference"
)

// heldEngine sends its pieces at once, then holds the reply open until
// the call ends: nothing follows them.
type heldEngine struct{ pieces []string }

func (heldEngine) Namespace() string { return "gpu" }
func (heldEngine) Models() []*inferencev1.Model {
	return []*inferencev1.Model{{Id: "gpu/held", Kind: inferencev1.ModelKind_MODEL_KIND_CHAT}}
}
func (e heldEngine) ChatCompletion(ctx context.Context, _ *inferencev1.ChatCompletionRequest, send func(*inferencev1.ChatCompletionResponse) error) error {
	for _, p := range e.pieces {
		if err := send(&inferencev1.ChatCompletionResponse{Content: p}); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return ctx.Err()
}
func (heldEngine) Embed(context.Context, *inferencev1.EmbedRequest) (*inferencev1.EmbedResponse, error) {
	return nil, inference.WrongKind("gpu/held", inferencev1.ModelKind_MODEL_KIND_EMBEDDING)
}
func (heldEngine) CountTokens(context.Context, *inferencev1.CountTokensRequest) (*inferencev1.CountTokensResponse, error) {
	return &inferencev1.CountTokensResponse{PromptTokens: 1}, nil
}

// Events the engine produced together may go out in one write, but none
// is left unflushed while the engine works: a client reads every piece
// sent so far while the reply is still held open. (Were one left in the
// buffer, the read would wait for ever and the test time out.)
func TestStreamFlushesBeforeTheEngineWaits(t *testing.T) {
	s := newStack(t, stackConfig{local: true, engines: []inference.Engine{heldEngine{pieces: []string{"a ", "b ", "c"}}}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := http.DefaultClient.Do(s.newRequest(t, http.MethodPost, chatPath, keyAll,
		`{"model":"gpu/held","stream":true,"messages":[{"role":"user","content":"hi"}]}`).WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	c := chunks{id: resp.Header.Get("x-request-id")}
	for i, want := range []string{c.chunk(`{"role":"assistant","content":""}`, "null"),
		c.chunk(`{"content":"a "}`, "null"), c.chunk(`{"content":"b "}`, "null"), c.chunk(`{"content":"c"}`, "null")} {
		want = strings.Replace(want, `"model":"builtin/echo"`, `"model":"gpu/held"`, 1)
		got, err := readFrame(br)
		if err != nil || got != want {
			t.Fatalf("frame %d = %q (%v), want %q", i, got, err, want)
		}
	}
}

// The same holds for the legacy completions' and the Responses API's
// streams: the last piece sent arrives while the engine holds its reply.
func TestOtherStreamsFlushBeforeTheEngineWaits(t *testing.T) {
	s := newStack(t, stackConfig{local: true, engines: []inference.Engine{heldEngine{pieces: []string{"a ", "b ", "c"}}}})
	for _, tc := range []struct{ path, body, last string }{
		{"/v1/completions", `{"model":"gpu/held","stream":true,"prompt":"hi"}`, `"text":"c"`},
		{"/v1/responses", `{"model":"gpu/held","stream":true,"input":"hi"}`, `"delta":"c"`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resp, err := http.DefaultClient.Do(s.newRequest(t, http.MethodPost, tc.path, keyAll, tc.body).WithContext(ctx))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			br := bufio.NewReader(resp.Body)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("stream ended before %s: %v", tc.last, err)
				}
				if strings.Contains(line, tc.last) {
					return
				}
			}
		})
	}
}
