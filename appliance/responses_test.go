package appliance

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/server/keys"
	"github.com/tollgate-dev/tollgate/server/responsestore"
)

// With a ResponsesPath, a stored response is in that file once the
// appliance has stopped: Run closes the file before it returns (it can be
// opened again at once: bbolt's lock would hold it otherwise), after the
// requests drained, and the response is there under its tenant.
func TestStoredResponsesInTheirFile(t *testing.T) {
	cli := etcdtest.Client(t)
	k, secret, err := keys.NewStore(cli, time.Now).Create(context.Background(), keys.Spec{TenantID: "acme", Label: "app", AllModels: true})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), responsestore.FileName)
	ready := make(chan Addrs, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{
			GatewayAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Etcd: cli,
			Logger: slog.New(slog.DiscardHandler), OnReady: func(a Addrs) { ready <- a },
			ResponsesPath: path,
		})
	}()
	var a Addrs
	select {
	case a = <-ready:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+a.Gateway+"/v1/responses",
		strings.NewReader(`{"model":"builtin/echo","input":"keep me"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var doc struct {
		ID string `json:"id"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &doc) != nil || doc.ID == "" {
		t.Fatalf("store: %d %s", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}

	s, err := responsestore.Open(path, responsestore.Options{TTL: time.Hour})
	if err != nil {
		t.Fatalf("the file is still held after Run returned: %v", err)
	}
	defer s.Close()
	got, ok, err := s.Get(k.GetTenantId(), doc.ID, time.Now())
	if err != nil || !ok || string(got.Body) != string(body) || len(got.History) != 2 {
		t.Fatalf("stored %q with %d messages (ok %v, err %v), want the response sent and its 2 messages", got.Body, len(got.History), ok, err)
	}
	if _, ok, _ := s.Get("other", doc.ID, time.Now()); ok {
		t.Error("another tenant sees the response")
	}
}
