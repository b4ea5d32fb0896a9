package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tollgate-dev/tollgate/server/inference/vllm/vllmfake"
)

func parseEngineFlags(t *testing.T, args ...string) (*engineFlags, error) {
	t.Helper()
	var e engineFlags
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	e.register(fs)
	return &e, fs.Parse(args)
}

// Each --vllm and --vllm-embed server becomes an engine whose models are
// listed from the start; a server that is down is not fatal.
func TestEngineFlags(t *testing.T) {
	chat := vllmfake.Start(t)
	emb, caPEM := vllmfake.StartTLS(t, vllmfake.Model{ID: "e5", Embedding: true})
	emb.SetAPIKey("k1")
	dir := t.TempDir()
	keyFile, caFile := filepath.Join(dir, "key"), filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(keyFile, []byte("k1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := parseEngineFlags(t, "--vllm", "gpu="+chat.URL, "--vllm-embed", "emb="+emb.URL, "--vllm", "down=http://127.0.0.1:1",
		"--vllm-api-key-file", keyFile, "--vllm-ca", caFile)
	if err != nil {
		t.Fatal(err)
	}
	engines, metrics, err := e.engines(context.Background(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, eng := range engines {
		for _, m := range eng.Models() {
			got = append(got, m.GetId()+" "+m.GetKind().String())
		}
	}
	want := "gpu/meta-llama/Llama-3.1-8B-Instruct MODEL_KIND_CHAT,emb/e5 MODEL_KIND_EMBEDDING"
	if len(engines) != 3 || strings.Join(got, ",") != want {
		t.Fatalf("%d engines, models %q; want 3 and %q", len(engines), got, want)
	}
	if n := testutil.CollectAndCount(metrics, "tollgate_model_server_up"); n != 3 {
		t.Errorf("%d up gauges, want one per server", n)
	}
}

func TestEngineFlagsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"--vllm", "gpu"},
		{"--vllm", "=http://h:8000"},
		{"--vllm-embed", "emb="},
	} {
		if _, err := parseEngineFlags(t, args...); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--vllm", "a/b=http://h:8000"},
		{"--vllm", "gpu=h:8000"},
		{"--vllm", "gpu=http://h:8000", "--vllm-api-key-file", empty},
		{"--vllm", "gpu=http://h:8000", "--vllm-api-key-file", filepath.Join(t.TempDir(), "missing")},
		{"--vllm", "gpu=http://h:8000", "--vllm-ca", empty},
		{"--vllm", "gpu=http://h:8000", "--vllm-ca", filepath.Join(t.TempDir(), "missing")},
	} {
		e, err := parseEngineFlags(t, args...)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if _, _, err := e.engines(context.Background(), slog.New(slog.DiscardHandler)); err == nil {
			t.Errorf("%q: engines built", args)
		}
	}
}
