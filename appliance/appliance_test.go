package appliance

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/tollgate-dev/tollgate/internal/etcdtest"
	"github.com/tollgate-dev/tollgate/internal/lockedbuf"
	"github.com/tollgate-dev/tollgate/internal/webtest"
)

func TestMain(m *testing.M) { etcdtest.Main(m) }

// notifyWriter passes each write to w, then signals it on changed (without
// blocking: one pending signal is enough), so a test can wait for a log
// line instead of polling for it.
type notifyWriter struct {
	w       io.Writer
	changed chan<- struct{}
}

func (n notifyWriter) Write(p []byte) (int, error) {
	k, err := n.w.Write(p)
	select {
	case n.changed <- struct{}{}:
	default:
	}
	return k, err
}

// waitFor polls cond every 10ms until it holds, failing after 60s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s after 60s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A gateway whose etcd is unreachable serves from the start: /healthz says
// it is starting and every other route is 503, the gRPC health service
// NOT_SERVING, and the wait is logged. Once etcd answers, it is ready
// (SERVING), and only then reported up.
func TestServesWhileWaitingForEtcd(t *testing.T) {
	proxy := etcdtest.NewProxy(t)
	proxy.SetDown(true)
	cli := etcdtest.ClientAt(t, proxy.Endpoints(), etcdtest.Prefix(t))

	defer func(d time.Duration) { waitingWarnAfter = d }(waitingWarnAfter)
	waitingWarnAfter = 0 // etcd is known to be down: warn at once

	var logs lockedbuf.Buffer
	logged := make(chan struct{}, 1)
	ready := make(chan Addrs, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{
			GatewayAddr: "127.0.0.1:0",
			GRPCAddr:    "127.0.0.1:0",
			Etcd:        cli,
			Logger:      slog.New(slog.NewTextHandler(notifyWriter{&logs, logged}, nil)),
			OnReady:     func(a Addrs) { ready <- a },
		})
	}()

	// The warning names the gateway's address.
	re := regexp.MustCompile(`level=WARN msg="waiting for etcd[^"]*" gateway=(\S+) grpc=(\S+)`)
	var gateway, grpcAddr string
	deadline := time.After(60 * time.Second)
	for m := re.FindStringSubmatch(logs.String()); ; m = re.FindStringSubmatch(logs.String()) {
		if m != nil {
			gateway, grpcAddr = m[1], m[2]
			break
		}
		select {
		case <-logged:
		case err := <-done:
			t.Fatalf("Run ended before warning about etcd: %v", err)
		case <-deadline:
			t.Fatalf("no warning about waiting for etcd after 60s:\n%s", logs.String())
		}
	}

	status, hdr, body := webtest.Get(t, "http://"+gateway+"/healthz", "")
	var health map[string]string
	if err := json.Unmarshal(body, &health); err != nil || status != http.StatusServiceUnavailable ||
		health["status"] != "starting" || health["detail"] != "key cache not loaded: waiting for etcd" ||
		!strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
		t.Fatalf("starting /healthz: %d %s (%v)", status, body, err)
	}
	for _, path := range []string{"/v1/models", "/no/such/route"} {
		status, hdr, body := webtest.Get(t, "http://"+gateway+path, "")
		var env struct {
			Error struct{ Code, Type, Message, RequestID string }
		}
		if err := json.Unmarshal(body, &env); err != nil || status != http.StatusServiceUnavailable ||
			env.Error.Code != "service_unavailable" || env.Error.Type != "server_error" || env.Error.Message == "" ||
			hdr.Get("x-request-id") == "" || hdr.Get("Retry-After") == "" {
			t.Fatalf("starting %s: %d %v %s (%v)", path, status, hdr, body, err)
		}
	}
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	healthCli := healthpb.NewHealthClient(conn)
	if r, err := healthCli.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("gRPC health while starting: %v %v", r, err)
	}
	wctx, cancelWatch := context.WithTimeout(ctx, time.Minute) // a hang guard, not a timing
	defer cancelWatch()
	watch, err := healthCli.Watch(wctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := watch.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("gRPC health watch while starting: %v %v", r, err)
	}
	select {
	case a := <-ready:
		t.Fatalf("reported up (%v) before the key cache loaded", a)
	default:
	}

	proxy.SetDown(false)
	if r, err := watch.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("gRPC health watch once etcd answers: %v %v", r, err)
	}
	var a Addrs
	select {
	case a = <-ready:
	case err := <-done:
		t.Fatalf("Run ended before ready: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("not ready 60s after etcd came back")
	}
	if a.Gateway != gateway {
		t.Fatalf("ready at %s, warned about %s", a.Gateway, gateway)
	}
	if !strings.Contains(logs.String(), `level=INFO msg="etcd reachable`) {
		t.Errorf("no Info line once ready:\n%s", logs.String())
	}
	waitFor(t, "healthy", func() bool {
		status, _, _ := webtest.Get(t, "http://"+gateway+"/healthz", "")
		return status == http.StatusOK
	})

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// A metrics address already in use fails Run before it reports up.
func TestBusyMetricsAddrFailsBeforeReady(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	upCalled := false
	err = Run(context.Background(), Config{
		GatewayAddr: "127.0.0.1:0",
		GRPCAddr:    "127.0.0.1:0",
		MetricsAddr: busy.Addr().String(),
		Etcd:        etcdtest.Client(t),
		Logger:      slog.New(slog.DiscardHandler),
		OnReady:     func(Addrs) { upCalled = true },
	})
	if err == nil || !strings.Contains(err.Error(), "metrics listener") {
		t.Fatalf("Run: %v, want a metrics listener error", err)
	}
	if upCalled {
		t.Fatal("OnReady was called before the metrics address failed")
	}
}

// `OPTIONS *` reaches the edge like any other request and gets its 404 in
// the envelope, with a request id: net/http would otherwise answer it
// itself, 200 with an empty body, outside the gateway's rules.
func TestOptionsAsteriskInTheEnvelope(t *testing.T) {
	ready := make(chan Addrs, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{
			GatewayAddr: "127.0.0.1:0",
			GRPCAddr:    "127.0.0.1:0",
			Etcd:        etcdtest.Client(t),
			Logger:      slog.New(slog.DiscardHandler),
			OnReady:     func(a Addrs) { ready <- a },
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var a Addrs
	select {
	case a = <-ready:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	conn, err := net.Dial("tcp", a.Gateway)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute)) // a hang guard, not a timing
	if _, err := io.WriteString(conn, "OPTIONS * HTTP/1.1\r\nHost: "+a.Gateway+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("x-request-id") == "" ||
		!strings.HasPrefix(string(body), `{"error":{"code":"not_found",`) {
		t.Fatalf("OPTIONS *: %d %v %s", resp.StatusCode, resp.Header, body)
	}
}
