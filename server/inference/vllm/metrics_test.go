package vllm_test

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/inference/vllm"
)

func TestMetrics(t *testing.T) {
	m := vllm.NewMetrics()
	e, srv := newEngine(t, vllm.Config{Metrics: m})
	down, err := vllm.New(vllm.Config{Namespace: "down", URL: "http://127.0.0.1:1", Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	_ = down.Refresh(t.Context())

	req := &inferencev1.ChatCompletionRequest{Model: chatMdl, Messages: []*inferencev1.Message{user("hi")}}
	if _, err := collect(t, e, req); err != nil {
		t.Fatal(err)
	}
	srv.FailNext("/v1/chat/completions", http.StatusBadRequest, "too long")
	_, _ = collect(t, e, req)
	srv.FailNext("/v1/chat/completions", http.StatusInternalServerError, "boom")
	_, _ = collect(t, e, req)
	if _, err := e.CountTokens(t.Context(), &inferencev1.CountTokensRequest{Model: chatMdl, Messages: req.Messages}); err != nil {
		t.Fatal(err)
	}

	if n := testutil.CollectAndCount(m, "tollgate_model_server_up"); n != 2 {
		t.Errorf("%d up gauges, want one per server", n)
	}
	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{
		{"gpu up", testutil.ToFloat64(vllm.Gauge(m, "up", "gpu")), 1},
		{"gpu models", testutil.ToFloat64(vllm.Gauge(m, "models", "gpu")), 1},
		{"down up", testutil.ToFloat64(vllm.Gauge(m, "up", "down")), 0},
		{"chat ok", vllm.Calls(m, "gpu", "chat", "ok"), 1},
		{"chat refused", vllm.Calls(m, "gpu", "chat", "refused"), 1},
		{"chat error", vllm.Calls(m, "gpu", "chat", "error"), 1},
		{"tokenize ok", vllm.Calls(m, "gpu", "tokenize", "ok"), 1},
		{"models unavailable", vllm.Calls(m, "down", "models", "unavailable"), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m, "tollgate_model_server_response_seconds"); n != 3 {
		t.Errorf("%d response histograms, want models, chat and tokenize of gpu", n)
	}
}
