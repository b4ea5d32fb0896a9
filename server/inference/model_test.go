package inference_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/server/inference"
	"github.com/tollgate-dev/tollgate/server/inference/builtin"
	"github.com/tollgate-dev/tollgate/server/inference/vllm"
	"github.com/tollgate-dev/tollgate/server/inference/vllm/vllmfake"
)

const fakeModel = "meta-llama/Llama-3.1-8B-Instruct"

// withVLLM is a service of the built-in engine (no ModelFinder: it is
// listed) and a vLLM engine (a ModelFinder) in front of a fake model
// server, refreshing its list every interval.
func withVLLM(t *testing.T, interval time.Duration) (*inference.LocalClient, *vllm.Engine, *vllmfake.Server) {
	t.Helper()
	srv := vllmfake.Start(t, vllmfake.Model{ID: fakeModel, MaxModelLen: 4096}, vllmfake.Model{ID: "e5", Embedding: true})
	eng, err := vllm.New(vllm.Config{Namespace: "gpu", URL: srv.URL, RefreshInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	svc, err := inference.NewService(builtin.New(), eng)
	if err != nil {
		t.Fatal(err)
	}
	cli := inference.NewLocalClient(svc)
	return cli, eng, srv
}

// Model finds exactly what ListModels lists, and nothing else.
func TestModelIsWhatListModelsLists(t *testing.T) {
	cli, _, _ := withVLLM(t, time.Hour)
	list, err := cli.ListModels(t.Context(), &inferencev1.ListModelsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetModels()) != 4 {
		t.Fatalf("listed %d models, want 4: %v", len(list.GetModels()), list.GetModels())
	}
	for _, want := range list.GetModels() {
		got, ok := cli.Model(want.GetId())
		if !ok || !proto.Equal(got, want) {
			t.Errorf("Model(%q) = %v, %v; listed %v", want.GetId(), got, ok, want)
		}
	}
	for _, id := range []string{"", "gpu", "gpu/", "gpu/other", "builtin/other", "nope/" + fakeModel, fakeModel} {
		if m, ok := cli.Model(id); ok || m != nil {
			t.Errorf("Model(%q) = %v, %v; want none", id, m, ok)
		}
	}
}

// A model server restarted with another max_model_len is seen within the
// engine's refresh period: the next list read, not a process restart.
func TestModelFollowsTheServersList(t *testing.T) {
	const interval = 20 * time.Millisecond
	cli, eng, srv := withVLLM(t, interval)
	id := "gpu/" + fakeModel
	if m, _ := cli.Model(id); m.GetContextLength() != 4096 {
		t.Fatalf("context length %d, want 4096", m.GetContextLength())
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("engine's refresh loop: %v", err)
		}
	})
	srv.SetModels(vllmfake.Model{ID: fakeModel, MaxModelLen: 1024})
	// Liveness, not timing: a few refresh periods are enough, the bound
	// is only there so that a broken refresh fails instead of hanging.
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, ok := cli.Model(id)
		if ok && m.GetContextLength() == 1024 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the server's restart: %v, %v; want context length 1024", m, ok)
		}
		time.Sleep(interval)
	}
	srv.SetModels(vllmfake.Model{ID: "other"})
	for {
		if _, ok := cli.Model(id); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still found after the server stopped serving it", id)
		}
		time.Sleep(interval)
	}
}
