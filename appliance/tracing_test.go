package appliance

import (
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/server/keys"
)

// collector is an OTLP/gRPC trace collector keeping the names of the
// spans it is sent, by trace id.
type collector struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans map[string][]string
}

func (c *collector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				id := hex.EncodeToString(sp.GetTraceId())
				c.spans[id] = append(c.spans[id], sp.GetName())
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// With --otlp-endpoint, a chat request's spans reach the collector, in the
// trace of the client's traceparent: the spans batched when the appliance
// stops are flushed before Run returns.
func TestTracesReachTheCollector(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &collector{spans: map[string][]string{}}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, col)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	cli := etcdtest.Client(t)
	_, secret, err := keys.NewStore(cli, time.Now).Create(context.Background(), keys.Spec{TenantID: "acme", Label: "app", AllModels: true})
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan Addrs, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{
			GatewayAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Etcd: cli,
			Logger: slog.New(slog.DiscardHandler), OnReady: func(a Addrs) { ready <- a },
			OTLPEndpoint: lis.Addr().String(), OTLPInsecure: true,
		})
	}()
	var a Addrs
	select {
	case a = <-ready:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, err := http.NewRequest(http.MethodPost, "http://"+a.Gateway+"/v1/chat/completions",
		strings.NewReader(`{"model":"builtin/echo","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chat: %d %s", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	col.mu.Lock()
	got := slices.Sorted(slices.Values(col.spans[traceID]))
	col.mu.Unlock()
	// Unaudited here (no audit log): no audit.append span.
	want := []string{"POST /v1/chat/completions", "authenticate", "engine", "limits", "policy", "settle"}
	if !slices.Equal(got, want) {
		t.Fatalf("spans of the trace %v, want %v", got, want)
	}
}
