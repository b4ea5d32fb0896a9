package edge_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/pipeline"

	"google.golang.org/grpc"

	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/server/inference/builtin"
)

// embeddingsReply is an embeddings response with the vectors left raw, so
// float and base64 replies decode alike.
type embeddingsReply struct {
	Object string `json:"object"`
	Model  string `json:"model"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Usage struct {
		PromptTokens int64 `json:"prompt_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	} `json:"usage"`
}

// vector decodes one embedding as float32s, from a JSON array of numbers
// or from base64 of little-endian float32s.
func vector(t *testing.T, raw json.RawMessage, b64 bool) []float32 {
	t.Helper()
	if !b64 {
		var v []float32
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("float embedding %s: %v", raw, err)
		}
		return v
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("base64 embedding %s: %v", raw, err)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b)%4 != 0 {
		t.Fatalf("base64 embedding %q: %v (%d bytes)", s, err, len(b))
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func TestEmbeddings(t *testing.T) {
	cases := []struct {
		name   string
		fields string   // input and options
		texts  []string // what builtin/embed embeds, in order
		dims   int
		tokens int64
	}{
		{"string", `"input":"Hello world"`, []string{"Hello world"}, 256, 2},
		{"array of strings", `"input":["hello world","tollgate","a"]`, []string{"hello world", "tollgate", "a"}, 256, 4},
		{"token ids", `"input":[1,22,333]`, []string{"1 22 333"}, 256, 3},
		{"arrays of token ids", `"input":[[1,2],[3],[40,50,60]]`, []string{"1 2", "3", "40 50 60"}, 256, 6},
		{"dimensions", `"input":["the quick brown fox","jumps"],"dimensions":8`, []string{"the quick brown fox", "jumps"}, 8, 5},
		{"all dimensions", `"input":"x","dimensions":256`, []string{"x"}, 256, 1},
		{"user accepted", `"input":"x","user":"someone"`, []string{"x"}, 256, 1},
	}
	eachTransport(t, stackConfig{}, func(t *testing.T, s *stack) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				var vectors [][]float32
				for _, format := range []string{``, `,"encoding_format":"float"`, `,"encoding_format":"base64"`} {
					r := s.post(t, embedPath, keyAll, `{"model":"builtin/embed",`+tc.fields+format+`}`)
					body := wantOK(t, r)
					m := decodeMap(t, body)
					wantKeys(t, "embeddings", m, "object", "data", "model", "usage")
					wantKeys(t, "usage", m["usage"], "prompt_tokens", "total_tokens")
					var reply embeddingsReply
					if err := json.Unmarshal(body, &reply); err != nil {
						t.Fatal(err)
					}
					if reply.Object != "list" || reply.Model != "builtin/embed" {
						t.Errorf("object %q model %q", reply.Object, reply.Model)
					}
					if reply.Usage.PromptTokens != tc.tokens || reply.Usage.TotalTokens != tc.tokens {
						t.Errorf("usage %+v, want %d tokens", reply.Usage, tc.tokens)
					}
					if len(reply.Data) != len(tc.texts) {
						t.Fatalf("%d embeddings, want %d", len(reply.Data), len(tc.texts))
					}
					for i, d := range reply.Data {
						wantKeys(t, fmt.Sprintf("data[%d]", i), m["data"].([]any)[i], "object", "index", "embedding")
						if d.Object != "embedding" || d.Index != i {
							t.Errorf("data[%d]: object %q index %d", i, d.Object, d.Index)
						}
						got := vector(t, d.Embedding, format == `,"encoding_format":"base64"`)
						if want := builtin.Vector(tc.texts[i], tc.dims); !slices.Equal(got, want) {
							t.Errorf("data[%d] (%s): vector differs from builtin.Vector(%q, %d)", i, format, tc.texts[i], tc.dims)
						}
						vectors = append(vectors, got)
					}
				}
				// float, explicit float and base64 are the same vectors.
				n := len(tc.texts)
				for i := range n {
					if !slices.Equal(vectors[i], vectors[n+i]) || !slices.Equal(vectors[i], vectors[2*n+i]) {
						t.Errorf("input %d: the three encodings differ", i)
					}
				}
			})
		}
	})
}

// repeatList is n copies of item, comma-separated: the inside of a JSON
// array.
func repeatList(item string, n int) string {
	return strings.TrimSuffix(strings.Repeat(item+",", n), ",")
}

// Every array of an embeddings input holds up to 2048 items, as OpenAI's
// limits say: 2048 inputs, and 2048 token ids in one token-id array (one
// more is 400, see TestBadRequest).
func TestEmbeddingsArrayLimit(t *testing.T) {
	s := newStack(t, stackConfig{})
	for _, input := range []string{
		`[` + repeatList(`"a"`, 2048) + `]`,
		`[` + repeatList("1", 2048) + `]`,
		`[` + repeatList("[1]", 2048) + `]`,
		`[[1],[` + repeatList("1", 2048) + `]]`,
	} {
		wantOK(t, s.post(t, embedPath, keyAll, `{"model":"builtin/embed","input":`+input+`}`))
	}
}

// embedAnswer is an inference client whose Embed answers values, as an
// engine gone wrong might; nothing else is called.
type embedAnswer struct {
	inferencev1.InferenceServiceClient
	values []float32
}

func (e embedAnswer) Embed(context.Context, *inferencev1.EmbedRequest, ...grpc.CallOption) (*inferencev1.EmbedResponse, error) {
	return &inferencev1.EmbedResponse{Embeddings: []*inferencev1.Embedding{{Values: e.values}},
		Usage: &inferencev1.Usage{PromptTokens: 1}}, nil
}

// An engine answering a NaN or an infinity, which JSON cannot carry, is a
// broken answer: 500 in the envelope, recorded like any other, instead of
// a connection cut with no answer and no event.
func TestNonFiniteEmbeddingIs500(t *testing.T) {
	for name, v := range map[string]float32{"NaN": float32(math.NaN()), "+Inf": float32(math.Inf(1)), "-Inf": float32(math.Inf(-1))} {
		for _, format := range []string{"", `,"encoding_format":"base64"`} {
			t.Run(name+format, func(t *testing.T) {
				audit := newAuditRecorder()
				logger := slog.New(slog.NewTextHandler(io.Discard, nil))
				core := pipeline.New(pipeline.Config{Inference: embedAnswer{values: []float32{0.5, v}}, Auth: testAuth(), Audit: audit, Logger: logger})
				srv := httptest.NewServer(edge.New(edge.Config{Pipeline: core, Logger: logger}))
				defer srv.Close()
				req, err := http.NewRequest(http.MethodPost, srv.URL+embedPath, strings.NewReader(`{"model":"builtin/embed","input":"x"`+format+`}`))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer "+keyAll)
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), `"code":"internal_error"`) {
					t.Fatalf("%d %s, want 500 internal_error", resp.StatusCode, body)
				}
				if ev := audit.next(t); ev.Status != http.StatusInternalServerError || string(ev.ResponseBody) != string(body) {
					t.Errorf("recorded %d %q, want the 500 sent", ev.Status, ev.ResponseBody)
				}
			})
		}
	}
}
